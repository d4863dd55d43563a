// Package browsertest starts headless Chromium (Debian's chromium package) for the
// dashboard's browser tests, through chromedp, and holds the few actions those tests share.
//
// Duties:
//   - find the browser on PATH, so that a test can skip with one line when it is missing;
//   - start it confined to loopback and return a chromedp context for its first tab;
//   - stop it leaving nothing behind: no process, no goroutine, no profile directory;
//   - record Content-Security-Policy violations, and capture the whole page as PNG.
//
// Decisions where the design is silent:
//   - chromedp talks to the browser over a pipe (--remote-debugging-pipe), so the browser
//     opens no DevTools port at all.
//   - The browser is confined to loopback: every host name but 127.0.0.1 and localhost
//     fails to resolve, and every non-loopback request goes to a proxy at 127.0.0.1:9 where
//     nothing listens. Background services (updates, sync, safe browsing, metrics) are off.
//   - Stopping cancels the tab's context and then the allocator's: chromedp kills the
//     browser, waits for it and removes its temporary profile. chromedp then also looks for
//     leftover helpers by their --user-data-dir argument, but Chromium's helpers (zygotes,
//     renderers, the network and GPU processes) rewrite their command lines, so it finds
//     none. The browser therefore starts in a process group of its own (beside chromedp's
//     kill-on-parent-death) and stop kills that group and waits, up to 5 s, until no
//     member of it runs. Zombies are not waited for: reaping orphans is init's job.
//   - The sandbox is off (--no-sandbox), as CI containers run the tests as root or without
//     user namespaces; the pages the tests open are their own.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// ErrNoBrowser is returned by Start when there is no browser to run.
var ErrNoBrowser = errors.New("browsertest: no chromium binary on PATH")

// Find returns the path of the first of chromium, chromium-browser on PATH, or "".
func Find() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Options configure Start.
type Options struct {
	// Binary is the browser to run. Default: Find().
	Binary string
	// Width and Height are the window size in CSS pixels. Default 1280 x 1000.
	Width, Height int
}

func (o *Options) defaults() {
	if o.Binary == "" {
		o.Binary = Find()
	}
	if o.Width == 0 {
		o.Width = 1280
	}
	if o.Height == 0 {
		o.Height = 1000
	}
}

// allocatorOptions are chromedp's defaults plus the loopback confinement and the quiet
// flags (see the package doc).
func allocatorOptions(opt Options) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(opt.Binary),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(opt.Width, opt.Height),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE localhost"),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// This replaces chromedp's own setting, Pdeathsig, and keeps it.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		}),
	)
}

// Start starts headless Chromium and opens its first tab (about:blank). Run chromedp
// actions on the returned tab context. The browser lives until stop is called or ctx
// ends; stop kills it, waits until its processes are gone and its profile removed, and
// may be called more than once. On error nothing is left running.
func Start(ctx context.Context, opt Options) (tab context.Context, stop func(), err error) {
	opt.defaults()
	if opt.Binary == "" {
		return nil, nil, ErrNoBrowser
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, allocatorOptions(opt)...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			pgid := 0
			if b := chromedp.FromContext(tab).Browser; b != nil && b.Process() != nil {
				pgid = b.Process().Pid
			}
			cancelTab()
			cancelAlloc()
			if pgid > 0 {
				killGroup(pgid, 5*time.Second)
			}
		})
	}
	// The first action starts the browser and attaches to its tab.
	if err := chromedp.Do(tab); err != nil {
		stop()
		return nil, nil, fmt.Errorf("browsertest: start %s: %w", opt.Binary, err)
	}
	return tab, stop, nil
}

// RecordCSP is an action that makes every document the tab loads from now on collect its
// Content-Security-Policy violations in window.__csp, as "directive blocked-uri" strings.
// Run it before navigating.
func RecordCSP() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
			window.__csp = [];
			document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`})
		return err
	})
}

// FullPage is an action that captures the whole page, beyond the viewport, as PNG.
func FullPage() chromedp.Action[[]byte] {
	return func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		m, err := cdp.Call(ctx, t, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		p := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng, CaptureBeyondViewport: new(true)}
		if s := m.CSSContentSize; s != nil && s.Width > 0 && s.Height > 0 {
			p.Clip = &page.Viewport{Width: s.Width, Height: s.Height, Scale: 1}
		}
		r, err := cdp.Call(ctx, t, page.CaptureScreenshot, p)
		if err != nil {
			return nil, err
		}
		return r.Data, nil
	}
}

// killGroup kills the process group pgid and waits up to limit until none of its members
// runs (zombies left to their reaper do not count).
func killGroup(pgid int, limit time.Duration) {
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		syscall.Kill(-pgid, syscall.SIGKILL)
		if len(groupMembers(pgid)) == 0 || time.Now().After(deadline) {
			return
		}
	}
}

// groupMembers returns the pids of the running (not zombie) processes in process group
// pgid, read from /proc.
func groupMembers(pgid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}
