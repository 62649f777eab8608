package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bmcis/knowledge/gen/openapi"
	"github.com/bmcis/knowledge/platform/version"
)

// openAPIDocument is the generated OpenAPI v2 document with what the
// generator cannot know: title and version, the credential schemes, which
// routes need which, and the gateway's error body.
func openAPIDocument() ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		return nil, fmt.Errorf("embedded OpenAPI document: %w", err)
	}
	doc["info"] = map[string]any{
		"title":       "BMCIS Knowledge REST API",
		"version":     version.Version,
		"description": "REST transcoding of the search, vendorgraph and auth gRPC services. Data routes take an API key (X-API-Key or Authorization: Bearer); key administration and document deletion take the admin token (X-Admin-Token). Errors are {code, message, details}.",
	}
	doc["securityDefinitions"] = map[string]any{
		"ApiKey":     map[string]any{"type": "apiKey", "in": "header", "name": HeaderAPIKey},
		"Bearer":     map[string]any{"type": "apiKey", "in": "header", "name": "Authorization", "description": "Bearer <API key>"},
		"AdminToken": map[string]any{"type": "apiKey", "in": "header", "name": HeaderAdminToken},
	}
	doc["security"] = []any{map[string]any{"ApiKey": []any{}}, map[string]any{"Bearer": []any{}}}
	defs, _ := doc["definitions"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
		doc["definitions"] = defs
	}
	defs["gatewayError"] = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"code":    map[string]any{"type": "string", "description": "Stable upper-case code: AUTH_REQUIRED, RATE_LIMIT, NOT_FOUND, ..."},
			"message": map[string]any{"type": "string"},
			"details": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/definitions/protobufAny"}},
		},
		"required": []any{"code", "message", "details"},
	}
	paths, _ := doc["paths"].(map[string]any)
	if paths == nil {
		paths = map[string]any{}
		doc["paths"] = paths
	}
	addUploadOperation(paths, defs)
	for path, v := range paths {
		ops, _ := v.(map[string]any)
		for method, o := range ops {
			op, _ := o.(map[string]any)
			if op == nil {
				continue
			}
			if rt, ok := routeIndex[routeKey(strings.ToUpper(method), path)]; ok && rt.Access == Admin {
				op["security"] = []any{map[string]any{"AdminToken": []any{}}}
			}
			if resps, _ := op["responses"].(map[string]any); resps != nil {
				resps["default"] = map[string]any{
					"description": "An error: {code, message, details}; Retry-After on 429 and 503.",
					"schema":      map[string]any{"$ref": "#/definitions/gatewayError"},
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addUploadOperation documents the upload route, which the gateway serves
// itself (a client stream has no transcoding).
func addUploadOperation(paths, defs map[string]any) {
	num := func(desc string) map[string]any {
		return map[string]any{"type": "integer", "format": "int32", "description": desc}
	}
	defs["v1IngestFailure"] = map[string]any{"type": "object", "properties": map[string]any{
		"externalId": map[string]any{"type": "string"},
		"sourceFile": map[string]any{"type": "string"},
		"reason":     map[string]any{"type": "string", "description": "Why the file was not ingested (unknown format, corrupt, too large, ...)."},
	}}
	defs["v1IngestDocumentsResponse"] = map[string]any{"type": "object", "properties": map[string]any{
		"documentsReceived":  num("Files received."),
		"documentsWritten":   num("Files written (new or changed)."),
		"documentsUnchanged": num("Files whose content had not changed."),
		"documentsFailed":    num("Files rejected; see failures."),
		"documentsDeleted":   num("Always 0 for an upload: it deletes nothing."),
		"chunksWritten":      num("Chunks written."),
		"failures":           map[string]any{"type": "array", "items": map[string]any{"$ref": "#/definitions/v1IngestFailure"}},
		"seconds":            map[string]any{"type": "number", "format": "double"},
	}}
	paths[UploadPath] = map[string]any{"post": map[string]any{
		"operationId": "SearchService_UploadFiles",
		"summary":     "Upload one file, or a zip of files, into a named source (ingest credential in X-Admin-Token).",
		"description": "The body is the file's bytes; ?file= names it and its extension picks the format. A .zip is unpacked: " +
			"entries with absolute paths, '..', backslashes or links refuse the whole archive, hidden files are skipped, " +
			"at most 10000 entries, each at most BMCIS_GATEWAY_MAX_UPLOAD_BYTES, all together at most four times it. " +
			"Files become documents NAME:path of the source; nothing is deleted. A file that cannot be read is listed in failures and the others go in (200); " +
			"when no file goes in, the answer is 400 UPLOAD_REJECTED with this summary, failures included, in its details. " +
			"The credential is checked before the body is read: a wrong one is refused at once (401/403 ADMIN_TOKEN_INVALID).",
		"tags":     []any{"SearchService"},
		"consumes": []any{"application/octet-stream", "application/zip"},
		"parameters": []any{
			map[string]any{"name": "name", "in": "path", "required": true, "type": "string", "description": "Source name: 1..64 of a-z 0-9 . _ -"},
			map[string]any{"name": "file", "in": "query", "required": true, "type": "string", "description": "File name, e.g. handbook.pdf or docs.zip"},
			map[string]any{"name": "body", "in": "body", "required": true, "schema": map[string]any{"type": "string", "format": "binary"}},
		},
		"responses": map[string]any{
			"200": map[string]any{
				"description": "What went in: at least one file written or unchanged; the others in failures.",
				"schema":      map[string]any{"$ref": "#/definitions/v1IngestDocumentsResponse"},
			},
			"400": map[string]any{
				"description": "BAD_UPLOAD, BAD_ZIP, or UPLOAD_REJECTED when no file went in (details: ErrorInfo, then the v1IngestDocumentsResponse with the failures).",
				"schema":      map[string]any{"$ref": "#/definitions/gatewayError"},
			},
		},
	}}
}
