// Package httpjson writes the JSON bodies of the gateway's own answers
// (errors and the dashboard's /api/* endpoints) in the shapes the dashboard
// API reference gives: no-store, timestamps in UTC ISO 8601 with
// milliseconds.
package httpjson

import (
	"encoding/json"
	"net/http"
	"time"
)

// timeFormat is ISO 8601 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// Time formats t as the dashboard's timestamps are written.
func Time(t time.Time) string { return t.UTC().Format(timeFormat) }

// Write writes v as a JSON response.
func Write(w http.ResponseWriter, httpStatus int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpStatus = http.StatusInternalServerError
		b = []byte(`{"code":"INTERNAL","message":"failed to encode response","details":[]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(append(b, '\n'))
}
