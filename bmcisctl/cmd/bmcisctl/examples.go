package main

// examples are each command's examples, shown by `bmcisctl help COMMAND`
// and COMMAND --help. TestExamplesParse parses every one, so each stays a
// command line that works.
var examples = map[string][]string{
	"audit": {
		"bmcisctl audit --since 24h",
		"bmcisctl audit --principal KEY_ID --tool semantic_search -o json",
		"bmcisctl audit -since 7d -principal KEY_ID -json",
	},
	"backup": {
		"bmcisctl backup bmcis.backup",
		"bmcisctl backup --force bmcis.backup -o json",
	},
	"bench": {
		"bmcisctl bench search --chunks 100000 --duration 10s",
		"bmcisctl bench search --chunks 0 --modes hybrid --concurrency 1,16",
	},
	"delete": {
		"bmcisctl delete handbook:security/old.md",
		"bmcisctl delete --addr search:50051 a.md b.md",
		"bmcisctl delete handbook:security/mfa.md -o json",
	},
	"documents": {
		"bmcisctl documents --principal group:hr",
		"bmcisctl documents --readable-by group:hr,group:legal",
		"bmcisctl documents --source handbook --category security -o json",
		"bmcisctl documents --source - --principal everyone",
		"bmcisctl documents show handbook:security/mfa.md",
	},
	"eval": {
		"bmcisctl eval --beir ../shared/data/scifact",
		"bmcisctl eval --beir ../shared/data/scifact --modes bm25 --no-ingest",
	},
	"graph": {
		"bmcisctl graph import services/vendorgraph/demo/demo-graph.jsonl",
		"bmcisctl graph import - -q < graph.jsonl",
		"bmcisctl graph status -o json",
	},
	"health": {
		"bmcisctl health --wait 30s 127.0.0.1:50051 127.0.0.1:50052",
		"bmcisctl health 127.0.0.1:50051 -o json",
	},
	"ingest": {
		"bmcisctl ingest services/search/demo/docs",
		"bmcisctl ingest corpus.jsonl --quiet",
		"bmcisctl ingest services/search/demo/docs -q -o json",
	},
	"keys": {
		"bmcisctl keys create --name ci --owner platform --expires-in 90d",
		"bmcisctl keys list --owner platform -o json",
		"bmcisctl keys revoke KEY_ID",
		"bmcisctl keys rotate KEY_ID --overlap 24h",
	},
	"migrate": {
		"bmcisctl migrate up",
		"bmcisctl migrate status",
		"bmcisctl migrate down 13 --yes",
	},
	"reindex": {
		"bmcisctl reindex",
		"bmcisctl reindex --addr search:50051",
		"bmcisctl reindex -o yaml",
	},
	"restore": {
		"bmcisctl restore bmcis.backup",
	},
	"search": {
		`bmcisctl search "security incident reporting" --mode bm25 -n 5`,
		`bmcisctl search "mfa rollout" -o json`,
		"bmcisctl search --queries queries.jsonl --top-k 100 --json",
	},
	"sources": {
		"bmcisctl sources",
		"bmcisctl sources -o yaml",
		"bmcisctl sources add runbooks --kind git --url https://github.com/acme/runbooks.git --path docs --every 15m --token-env SOURCE_TOKEN_RUNBOOKS",
		"bmcisctl sources add intranet --kind web --url https://intranet.example.com/sitemap.xml --every 1h --access group:staff",
		"bmcisctl sources sync runbooks",
		"bmcisctl sources remove intranet",
	},
	"sync": {
		"bmcisctl sync handbook ~/Documents/handbook",
		"bmcisctl sync handbook ~/Documents/handbook --watch",
		"bmcisctl sync handbook ~/Documents/handbook -w --interval 5s",
		"bmcisctl sync handbook ~/Documents/handbook --watch -o json",
	},
	"version": {
		"bmcisctl version",
	},
}
