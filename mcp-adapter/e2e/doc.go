// Package e2e tests the mcp-adapter binary from the outside against the real
// search, vendorgraph and auth services (platform/stacktest) with the demo
// data: over streamable HTTP with mcp-go's client, over stdio with the
// official MCP TypeScript SDK client (node/, skipped when node or npm is
// missing), and the end-to-end benchmark of docs/BENCHMARKS.md. It holds
// tests only.
package e2e
