package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestClassifyRaw(t *testing.T) {
	cases := []struct {
		err       error
		class     ErrorClass
		transient bool
	}{
		{nil, ClassNone, false},
		{os.ErrDeadlineExceeded, ClassTimeout, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, ClassReset, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ClassConnect, true},
		{&net.DNSError{Err: "no such host", IsNotFound: true}, ClassDNS, false},
		{&net.DNSError{Err: "server misbehaving", IsTemporary: true}, ClassDNS, true},
		{io.ErrUnexpectedEOF, ClassReset, true},
		{context.Canceled, ClassCanceled, false},
		{fmt.Errorf("x: %w", ErrHeaderTooLarge), ClassTooLargeHeader, false},
		{classErr(ClassProtocol, "u", errors.New("bad")), ClassProtocol, false},
		{wrapErr("u", fmt.Errorf("%w: %w", ErrDNS, &net.DNSError{IsNotFound: true})), ClassDNS, false},
		{errors.New("mystery"), ClassOther, false},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.class {
			t.Errorf("Classify(%v) = %q, want %q", c.err, got, c.class)
		}
		if got := IsTransient(c.err); got != c.transient {
			t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.transient)
		}
	}
}

func TestMaxConnsPerHost(t *testing.T) {
	var cur, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		cur.Add(-1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := testClient(t, func(cfg *Config) { cfg.MaxConnsPerHost = 2 })
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Do(context.Background(), Request{URL: srv.URL + "/"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrent requests %d, want 2", p)
	}
}

func TestCloseAndSweep(t *testing.T) {
	c := testClient(t, nil)
	for i := 0; i < 5; i++ {
		tg, err := parseTarget(fmt.Sprintf("http://h%d.test/", i))
		if err != nil {
			t.Fatal(err)
		}
		h, _ := c.hostClient(tg)
		if i < 3 {
			h.lastUse.Store(time.Now().Add(-time.Hour).UnixNano())
		}
	}
	c.mu.Lock()
	c.sweepLocked()
	n := len(c.hosts)
	c.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d pools after sweep, want 2", n)
	}
	c.Close()
	if _, err := c.Do(context.Background(), Request{URL: "http://h1.test/"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestNotModified(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(304)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		io.WriteString(w, "<html>")
	}))
	defer srv.Close()
	c := testClient(t, nil)
	resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/", IfNoneMatch: `"v1"`})
	if err != nil || resp.Status != 304 || len(resp.Body) != 0 || resp.Location != "" {
		t.Fatalf("%v %+v", err, resp)
	}
}
