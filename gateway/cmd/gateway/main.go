// Command gateway serves the services' REST API (grpc-gateway), the OpenAPI
// document and the operator dashboard.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "gateway: not implemented yet")
	os.Exit(1)
}
