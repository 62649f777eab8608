// Package e2e tests the gateway against the real search, vendorgraph and auth
// services on a real PostgreSQL (platform/testdb), including the dashboard in
// headless Chromium and the REST-over-gRPC overhead benchmark. It holds tests
// only.
package e2e
