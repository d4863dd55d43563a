package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start starts a browser for the test, or skips when there is none outside CI.
func start(t *testing.T, ctx context.Context) (context.Context, func()) {
	t.Helper()
	if Find() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH in CI")
		}
		t.Skip("no chromium on PATH")
	}
	tab, stop, err := Start(ctx, Options{Width: 800, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return tab, stop
}

func TestStartEvalScreenshotStop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>t</title><p id="x">41</p><script>document.getElementById("x").textContent = 41 + 1;</script>`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tab, stop := start(t, ctx)

	// The browser leads a process group that holds its helpers too.
	pid := chromedp.FromContext(tab).Browser.Process().Pid
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var profile string
	for a := range strings.SplitSeq(string(cmdline), "\x00") {
		if p, ok := strings.CutPrefix(a, "--user-data-dir="); ok {
			profile = p
		}
	}
	if profile == "" {
		t.Fatalf("browser %d runs without --user-data-dir: %q", pid, cmdline)
	}
	if pids := groupMembers(pid); len(pids) < 2 || !slices.Contains(pids, pid) {
		t.Errorf("process group %d: %v; want the browser and its helpers", pid, pids)
	}

	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if text, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("x").textContent`)); err != nil || text != "42" {
		t.Fatalf("eval: %q %v", text, err)
	}
	if sum, err := chromedp.Run(tab, chromedp.Evaluate[int](`new Promise(r => setTimeout(() => r(2 + 3), 10))`, chromedp.EvalAwaitPromise)); err != nil || sum != 5 {
		t.Fatalf("eval promise: %d %v", sum, err)
	}
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](`(() => { throw new Error("boom") })()`)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("thrown exception: %v", err)
	}
	if err := chromedp.Do(tab, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		return t.Call(ctx, "No.suchMethod", struct{}{}, nil)
	})); err == nil {
		t.Fatal("unknown method: no error")
	}
	png, err := chromedp.Run(tab, FullPage())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("screenshot: %d bytes, prefix %q", len(png), png[:min(8, len(png))])
	}
	// Requests beyond loopback fail inside the browser.
	blocked, err := chromedp.Run(tab, chromedp.Evaluate[bool](`fetch("http://example.com/").then(() => false, () => true)`, chromedp.EvalAwaitPromise))
	if err != nil || !blocked {
		t.Errorf("a request to example.com was not refused: %v %v", blocked, err)
	}

	stop()
	if err := chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`1`)); err == nil {
		t.Error("an action after stop succeeded")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("browser process %d still there after stop: %v", pid, err)
	}
	if pids := groupMembers(pid); len(pids) > 0 {
		t.Errorf("processes %v of the browser's group still run after stop", pids)
	}
	if _, err := os.Stat(profile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile directory left behind: %v", err)
	}
}

// TestRecordCSP: the recorder sees a violation of the page's policy, and none on a clean page.
func TestRecordCSP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'")
		fmt.Fprint(w, `<!doctype html><title>t</title>`)
		if r.URL.Path == "/bad" {
			fmt.Fprint(w, `<script>fetch("/x").catch(() => {})</script>`)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tab, _ := start(t, ctx)
	if err := chromedp.Do(tab, RecordCSP()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want int
	}{{"/good", 0}, {"/bad", 1}} {
		if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+c.path)); err != nil {
			t.Fatal(err)
		}
		var got []string
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			got, err = chromedp.Run(tab, chromedp.Evaluate[[]string](`window.__csp`))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) >= c.want || time.Now().After(deadline) {
				break
			}
		}
		if len(got) != c.want {
			t.Errorf("%s: violations %q, want %d", c.path, got, c.want)
		}
	}
}

func TestStartMissingBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := Start(ctx, Options{Binary: "/nonexistent/chromium"}); err == nil {
		t.Fatal("started a missing binary")
	}
}
