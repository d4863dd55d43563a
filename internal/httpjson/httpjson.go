// Package httpjson writes the JSON answers and errors of Crawlnode's HTTP endpoints, the
// public API's and the node-to-node ones alike, so that every endpoint answers an error
// in one shape: {"error": "...", "code": "..."} with a stable, machine-readable code.
package httpjson

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Write answers status with v as indented JSON.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteError answers status with an Error whose message is format's.
func WriteError(w http.ResponseWriter, status int, code, format string, a ...any) {
	Write(w, status, Error{Error: fmt.Sprintf(format, a...), Code: code})
}
