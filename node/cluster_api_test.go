package node

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/cluster"
)

// The API serves before a clustered node has joined; the cluster endpoints answer 503
// until then instead of touching the Raft controller that does not exist yet (GET
// /v1/cluster a few ms after the start used to panic on a nil controller). The internal
// routes' twin is cluster's TestInternalRoutesBeforeStart.
func TestClusterEndpointsBeforeStart(t *testing.T) {
	n := &Node{cluster: &cluster.Cluster{}}
	public := api.New(api.Config{}, apiBackend{n})
	for _, tc := range []struct {
		name string
		h    http.Handler
		req  *http.Request
	}{
		{"GET /v1/cluster", public, httptest.NewRequest("GET", "/v1/cluster", nil)},
		{"POST /v1/node/leave", public, httptest.NewRequest("POST", "/v1/node/leave", nil)},
		{"PATCH /v1/job", public, httptest.NewRequest("PATCH", "/v1/job", bytes.NewReader([]byte(`{"per_host": 2}`)))},
	} {
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, tc.req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s before start: %d %s, want 503", tc.name, rec.Code, rec.Body)
		}
	}
}
