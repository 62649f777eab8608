// Package openapi embeds the merged OpenAPI v2 document generated from the
// service contracts, so the gateway can serve it without files on disk.
package openapi

import _ "embed"

// JSON is the OpenAPI v2 document for every annotated RPC.
//
//go:embed bmcis.swagger.json
var JSON []byte
