// Command mcp-adapter is the MCP server Claude Desktop talks to. It is
// stateless and fans tool calls out to the search, vendorgraph and auth
// services.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "mcp-adapter: not implemented yet")
	os.Exit(1)
}
