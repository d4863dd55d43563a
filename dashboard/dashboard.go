package dashboard

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"strconv"
)

//go:embed index.html
var indexHTML []byte

// csp allows nothing but the page's own origin for API calls and exactly its one inline
// script and inline style sheet.
var csp = "default-src 'none'; connect-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; " +
	"script-src '" + scriptHash(indexHTML) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// scriptHash returns the CSP source ("sha256-...") of the page's inline script.
func scriptHash(page []byte) string {
	const open, end = "<script>", "</script>"
	i := bytes.Index(page, []byte(open))
	j := bytes.Index(page, []byte(end))
	if i < 0 || j < i {
		panic("dashboard: index.html has no inline script")
	}
	sum := sha256.Sum256(page[i+len(open) : j])
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// Handler serves the dashboard page at "/" and "/index.html" (GET and HEAD); any other
// path is 404 and any other method 405. Mount it on the node's mux at "GET /{$}" (and
// "GET /index.html") so the API's own 404 for unknown routes stays JSON.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" && r.URL.Path != "/index.html" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(indexHTML)))
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(indexHTML)
		}
	})
}
