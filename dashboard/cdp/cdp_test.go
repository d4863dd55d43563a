package cdp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// launch starts a browser for the test, or skips when there is none outside CI.
func launch(t *testing.T) *Browser {
	t.Helper()
	if Find() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH in CI")
		}
		t.Skip("no chromium on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Launch(ctx, Options{Width: 800, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestLaunchEvalScreenshotClose(t *testing.T) {
	b := launch(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>t</title><p id="x">41</p><script>document.getElementById("x").textContent = 41 + 1;</script>`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := b.Page(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	var text string
	if err := p.Eval(ctx, `document.getElementById("x").textContent`, &text); err != nil || text != "42" {
		t.Fatalf("eval: %q %v", text, err)
	}
	var sum int
	if err := p.Eval(ctx, `new Promise(r => setTimeout(() => r(2 + 3), 10))`, &sum); err != nil || sum != 5 {
		t.Fatalf("eval promise: %d %v", sum, err)
	}
	if err := p.Eval(ctx, `(() => { throw new Error("boom") })()`, nil); err == nil || !bytes.Contains([]byte(err.Error()), []byte("boom")) {
		t.Fatalf("thrown exception: %v", err)
	}
	if err := p.Call(ctx, "No.suchMethod", nil, nil); err == nil {
		t.Fatal("unknown method: no error")
	}
	png, err := p.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("screenshot: %d bytes, prefix %q", len(png), png[:min(8, len(png))])
	}
	// Requests beyond loopback fail inside the browser.
	var blocked bool
	if err := p.Eval(ctx, `fetch("http://example.com/").then(() => false, () => true)`, &blocked); err != nil || !blocked {
		t.Errorf("a request to example.com was not refused: %v %v", blocked, err)
	}
	p.Close()
	if err := p.Call(ctx, "Runtime.evaluate", map[string]any{"expression": "1"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after close: %v, want ErrClosed", err)
	}
	pid := b.Pid()
	b.Close()
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("browser process group %d still alive after Close: %v", pid, err)
	}
}

func TestLaunchMissingBinary(t *testing.T) {
	_, err := Launch(context.Background(), Options{Binary: "/nonexistent/chromium"})
	if err == nil {
		t.Fatal("launched a missing binary")
	}
}
