# BMCIS Knowledge. `make run` starts everything with demo data; `make test`
# runs every module's tests against a real PostgreSQL + pgvector and Redis.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Every Go module of the go.work workspace (tools/ is separate on purpose).
MODULES := . gen bmcisctl services/search services/vendorgraph services/auth mcp-adapter gateway
# Binaries: name=package.
BINARIES := \
	search=./services/search/cmd/search \
	bmcisctl=./bmcisctl/cmd/bmcisctl \
	vendorgraph=./services/vendorgraph/cmd/vendorgraph \
	auth=./services/auth/cmd/auth \
	mcp-adapter=./mcp-adapter/cmd/mcp-adapter \
	gateway=./gateway/cmd/gateway

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/bmcis/knowledge/platform/version.Version=$(VERSION) -X github.com/bmcis/knowledge/platform/version.Commit=$(COMMIT)
GO_TEST_FLAGS ?= -count=1
BUF := tools/run buf
# Built once into bin/tools/ by `make tools` (tools/run), before buf runs the
# plugins in parallel.
PINNED_TOOLS := buf protoc-gen-go protoc-gen-go-grpc protoc-gen-grpc-gateway protoc-gen-openapiv2

.PHONY: help
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: ## build every binary into bin/
	@mkdir -p bin
	@for b in $(BINARIES); do go build -trimpath -ldflags '$(LDFLAGS)' -o bin/$${b%%=*} $${b#*=}; done
	@echo "built: $$(ls bin | tr '\n' ' ')"

.PHONY: mcpb
mcpb: ## build the Claude Desktop extension bundle bin/bmcis-knowledge.mcpb (all platforms; needs npm; MCPB_SIGN_CERT/KEY sign it, with openssl)
	@MCPB_LDFLAGS='$(LDFLAGS)' deploy/mcpb/build.sh

.PHONY: run
run: build ## build, start PostgreSQL/Redis, migrate, load demo data, start every service
	@deploy/local/run.sh

.PHONY: stop
stop: ## stop the services, Redis and PostgreSQL
	@deploy/local/stop.sh

.PHONY: db
db: ## start only the local PostgreSQL and Redis
	@deploy/local/db.sh start
	@deploy/local/redis.sh start

.PHONY: test
test: db ## run every module's tests against the real database and Redis
	@export BMCIS_TEST_DATABASE_URL="$$(deploy/local/db.sh admin-url)" \
	        BMCIS_TEST_REDIS_URL="$$(deploy/local/redis.sh url)"; \
	for m in $(MODULES); do \
		echo "== go test $$m"; \
		(cd $$m && go test $(GO_TEST_FLAGS) ./...); \
	done

.PHONY: test-faults
test-faults: ## the fault suite (faults/): real binaries on a private PostgreSQL and Redis it breaks
	@BMCIS_FAULTS=1 go test $(GO_TEST_FLAGS) -v -timeout 10m ./faults/

.PHONY: test-upgrade
# Both releases are built fresh into a temporary directory each run (nothing
# is cached between runs but Go's own build cache).
test-upgrade: ## rolling upgrade (upgrade/): the previous release (deploy/upgrade/PREVIOUS_RELEASE) and this one side by side under load
	@bins=$$(mktemp -d); trap 'rm -rf "$$bins"' EXIT; \
	deploy/upgrade/build.sh previous "$$bins/previous"; \
	deploy/upgrade/build.sh current "$$bins/current"; \
	BMCIS_UPGRADE_PREVIOUS_BIN="$$bins/previous" BMCIS_UPGRADE_CURRENT_BIN="$$bins/current" \
		go test $(GO_TEST_FLAGS) -v -timeout 10m ./upgrade/

.PHONY: tools
tools: ## build the pinned code generators and buf into bin/tools/ (once per tools/go.mod)
	@tools/run --build $(PINNED_TOOLS)

.PHONY: generate
generate: tools ## regenerate Go, gateway and OpenAPI code from proto/
	@rm -rf gen/go gen/openapi/*.json
	@$(BUF) generate

.PHONY: check-generated
check-generated: generate ## fail when committed generated code differs from the protos
	@git diff --exit-code -- gen || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- gen)" || { git status --porcelain -- gen; echo "untracked generated files: run make generate and commit"; exit 1; }

.PHONY: check-generated-cold
# Run 1 is a newcomer's first `make check-generated`; run 2 prebuilds only buf,
# so buf's parallel plugins build themselves through tools/run's lock.
check-generated-cold: ## check-generated twice, each from an empty Go build cache and no built tools
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for prebuilt in "$(PINNED_TOOLS)" buf; do \
		echo "== check-generated from a cold cache, prebuilt: $$prebuilt"; \
		rm -rf "$$tmp/gocache" "$$tmp/tools"; \
		GOCACHE="$$tmp/gocache" BMCIS_TOOLS_BIN="$$tmp/tools" $(MAKE) -s check-generated PINNED_TOOLS="$$prebuilt"; \
	done

.PHONY: lint
lint: tools ## buf lint, buf format check, gofmt, go vet on every module
	@$(BUF) lint
	@$(BUF) format --diff --exit-code
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	@for m in $(MODULES); do (cd $$m && go vet ./...); done
	@cd deploy/check && GOWORK=off go vet ./...

.PHONY: deploy-check
deploy-check: ## render and check the Dockerfile and Kubernetes manifests (no cluster, no Docker)
	@cd deploy/check && GOWORK=off go test -count=1 ./...

.PHONY: breaking
breaking: tools ## check protos for breaking changes against main
	@$(BUF) breaking --against '.git#branch=main'

.PHONY: clean
clean: ## remove build output (keeps .data)
	rm -rf bin

.PHONY: print-modules
print-modules:
	@echo $(MODULES)
