// Package faults holds the fault suite: tests that run the real binaries on
// a private PostgreSQL and Redis started by the test, break one part
// (database, Redis, a service) and check what clients see, how fast the
// system recovers and that nothing acknowledged is lost. See README.md.
//
// The tests run only with BMCIS_FAULTS=1 (`make test-faults`); they need
// PostgreSQL 15 with pgvector and redis-server installed, as
// deploy/local/install-deps.sh does.
package faults
