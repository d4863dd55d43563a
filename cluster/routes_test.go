package cluster

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/crawlnode/crawlnode/control"
)

// The internal routes serve before a node has joined; the Raft ones answer 503 until its
// controller exists instead of touching a nil one.
func TestInternalRoutesBeforeStart(t *testing.T) {
	c := &Cluster{}
	cmd, err := control.Encode(control.RemoveMember{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		req  *http.Request
	}{
		{"POST /internal/v1/raft/apply", c.applyHandler, httptest.NewRequest("POST", "/internal/v1/raft/apply", bytes.NewReader(cmd))},
		{"GET /internal/v1/raft/index", c.indexHandler, httptest.NewRequest("GET", "/internal/v1/raft/index", nil)},
	} {
		rec := httptest.NewRecorder()
		tc.h(rec, tc.req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s before start: %d %s, want 503", tc.name, rec.Code, rec.Body)
		}
	}
	// A body that is no command is refused as such, started or not.
	rec := httptest.NewRecorder()
	c.applyHandler(rec, httptest.NewRequest("POST", "/internal/v1/raft/apply", bytes.NewReader([]byte("junk"))))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("junk command: %d %s, want 400", rec.Code, rec.Body)
	}
}

// Config's defaults and checks: what a node without flags gets, and what it refuses.
func TestConfigDefaultsAndValidate(t *testing.T) {
	var c Config
	c.SetDefaults()
	if c.BindAddr != "127.0.0.1:0" || c.RaftAddr != "127.0.0.1:0" || c.BootstrapExpect != 1 || c.Profile != "lan" || c.Grace.Seconds() != 30 {
		t.Errorf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	c = Config{BindAddr: "10.0.0.1:7946", Join: []string{"10.0.0.2:7946"}}
	c.SetDefaults()
	if c.RaftAddr != "10.0.0.1:7947" || c.BootstrapExpect != 0 {
		t.Errorf("raft address follows the gossip port, no bootstrap with a join: %+v", c)
	}
	for _, bad := range []Config{
		{BindAddr: "nonsense"},
		{Join: []string{"host-without-port"}},
		{AdvertiseAddr: "x"},
		{BootstrapExpect: -1},
		{Grace: -1},
		{Profile: "wan"},
	} {
		bad.SetDefaults()
		if err := bad.Validate(); err == nil || !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: %v, want ErrBadConfig", bad, err)
		}
	}
}
