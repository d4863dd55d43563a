// Package cdp is a minimal Chrome DevTools Protocol client for tests: it starts headless
// Chromium (Debian's chromium package) on loopback, opens its page target over a WebSocket
// (golang.org/x/net/websocket) and sends commands: navigate, evaluate JavaScript, capture a
// screenshot. It carries no browser library and no protocol schema; Call takes any method.
//
// The browser is confined to loopback: every host name but 127.0.0.1 and localhost fails to
// resolve, and every non-loopback request goes to a proxy at 127.0.0.1:9 where nothing
// listens. Background services (updates, sync, safe browsing, metrics) are switched off.
// Chromium's child processes share its process group; Close kills that group and removes
// the temporary profile, so a test leaves no process behind.
package cdp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/websocket"
)

// Sentinel errors.
var (
	ErrNoBrowser = errors.New("cdp: no chromium binary on PATH")
	ErrClosed    = errors.New("cdp: connection closed")
	ErrStart     = errors.New("cdp: browser did not start")
)

// Find returns the path of the first of chromium, chromium-browser on PATH, or "".
func Find() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Options configure Launch.
type Options struct {
	// Binary is the browser to run. Default: Find().
	Binary string
	// Width and Height are the window size in CSS pixels. Default 1280 x 1000.
	Width, Height int
	// StartTimeout bounds the wait for the DevTools endpoint. Default 30 s: a cold start
	// on a loaded 2-core machine takes several seconds.
	StartTimeout time.Duration
	// Log, if set, receives the browser's stderr.
	Log io.Writer
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
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
}

// origin is the Origin header the client sends; the browser is told to accept it.
const origin = "http://127.0.0.1"

// Browser is one running headless Chromium.
type Browser struct {
	cmd     *exec.Cmd
	profile string
	base    string // http://127.0.0.1:PORT of the DevTools endpoint
	waited  chan struct{}
	once    sync.Once
}

// Launch starts headless Chromium with a fresh temporary profile and waits for its
// DevTools endpoint.
func Launch(ctx context.Context, opt Options) (*Browser, error) {
	opt.defaults()
	if opt.Binary == "" {
		return nil, ErrNoBrowser
	}
	profile, err := os.MkdirTemp("", "cdp-profile-")
	if err != nil {
		return nil, fmt.Errorf("cdp: profile: %w", err)
	}
	args := []string{
		"--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--remote-allow-origins=" + origin, "--user-data-dir=" + profile,
		"--window-size=" + strconv.Itoa(opt.Width) + "," + strconv.Itoa(opt.Height),
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
		"--disable-background-networking", "--disable-component-update", "--disable-default-apps",
		"--disable-client-side-phishing-detection", "--disable-domain-reliability", "--no-pings",
		"--disable-breakpad", "--metrics-recording-only", "--mute-audio", "--hide-scrollbars",
		"--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE localhost",
		"--proxy-server=http://127.0.0.1:9",
		"about:blank",
	}
	lw := &lineWatcher{found: make(chan string, 1), copyTo: opt.Log}
	cmd := exec.Command(opt.Binary, args...)
	cmd.Stderr = lw
	cmd.Stdout = opt.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profile)
		return nil, fmt.Errorf("cdp: start %s: %w", opt.Binary, err)
	}
	b := &Browser{cmd: cmd, profile: profile, waited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(b.waited)
	}()
	timer := time.NewTimer(opt.StartTimeout)
	defer timer.Stop()
	select {
	case ws := <-lw.found:
		u, err := url.Parse(ws)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("%w: bad endpoint %q", ErrStart, ws)
		}
		b.base = "http://" + u.Host
		return b, nil
	case <-b.waited:
		b.Close()
		return nil, fmt.Errorf("%w: exited: %s", ErrStart, lw.tail())
	case <-timer.C:
		b.Close()
		return nil, fmt.Errorf("%w: no DevTools endpoint within %s: %s", ErrStart, opt.StartTimeout, lw.tail())
	case <-ctx.Done():
		b.Close()
		return nil, ctx.Err()
	}
}

// Pid is the browser's process id (also its process group).
func (b *Browser) Pid() int { return b.cmd.Process.Pid }

// Close kills the browser's process group, waits for the browser and (up to 5 s) for the
// rest of the group to be gone, and removes the profile.
func (b *Browser) Close() error {
	b.once.Do(func() {
		pgid := b.cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-b.waited
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			if syscall.Kill(-pgid, 0) != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		os.RemoveAll(b.profile)
	})
	return nil
}

// target is one entry of /json/list.
type target struct {
	ID, Type, URL        string
	WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
}

// Page connects to the browser's first page target (the about:blank tab it started with).
func (b *Browser) Page(ctx context.Context) (*Page, error) {
	var list []target
	deadline := time.Now().Add(10 * time.Second)
	for {
		list = nil
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/json/list", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
		}
		for _, t := range list {
			if t.Type == "page" && t.WebSocketDebuggerURL != "" {
				return Dial(ctx, t.WebSocketDebuggerURL)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: no page target (%v)", ErrStart, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lineWatcher scans the browser's stderr for "DevTools listening on ws://...".
type lineWatcher struct {
	mu     sync.Mutex
	buf    []byte
	last   []byte // the last few KiB, for error messages
	sent   bool
	found  chan string
	copyTo io.Writer
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.copyTo != nil {
		l.copyTo.Write(p)
	}
	l.last = append(l.last, p...)
	if len(l.last) > 4096 {
		l.last = l.last[len(l.last)-4096:]
	}
	if l.sent {
		return len(p), nil
	}
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		if _, ws, ok := strings.Cut(line, "DevTools listening on "); ok {
			l.sent = true
			l.buf = nil
			l.found <- strings.TrimSpace(ws)
			break
		}
	}
	return len(p), nil
}

func (l *lineWatcher) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.last)
}

// Page is a DevTools session with one page target.
type Page struct {
	ws      *websocket.Conn
	wmu     sync.Mutex // serialises sends
	mu      sync.Mutex
	next    int64
	pending map[int64]chan message
	err     error // set once the reader stopped
	done    chan struct{}
}

// message is a CDP response or event.
type message struct {
	ID     int64           `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Dial opens a DevTools WebSocket (ws://127.0.0.1:PORT/devtools/page/ID).
func Dial(ctx context.Context, wsURL string) (*Page, error) {
	cfg, err := websocket.NewConfig(wsURL, origin)
	if err != nil {
		return nil, fmt.Errorf("cdp: %w", err)
	}
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("cdp: dial %s: %w", wsURL, err)
	}
	p := &Page{ws: ws, pending: map[int64]chan message{}, done: make(chan struct{})}
	go p.read()
	return p, nil
}

// read delivers responses to their callers; events are dropped.
func (p *Page) read() {
	defer close(p.done)
	var err error
	for {
		var data []byte
		data, err = p.receive()
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(data, &m) != nil || m.ID == 0 {
			continue
		}
		p.mu.Lock()
		ch := p.pending[m.ID]
		delete(p.pending, m.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	p.mu.Lock()
	p.err = fmt.Errorf("%w: %v", ErrClosed, err)
	for id, ch := range p.pending {
		close(ch)
		delete(p.pending, id)
	}
	p.mu.Unlock()
}

// receive reads one message. x/net/websocket returns a fragmented message frame by frame,
// so frames are joined until they form one JSON value (Chromium does not fragment today).
func (p *Page) receive() ([]byte, error) {
	var msg []byte
	for {
		var frame []byte
		if err := websocket.Message.Receive(p.ws, &frame); err != nil {
			return nil, err
		}
		msg = append(msg, frame...)
		if json.Valid(msg) {
			return msg, nil
		}
	}
}

// Call sends method with params and decodes the response's result into result (if not nil).
func (p *Page) Call(ctx context.Context, method string, params, result any) error {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan message, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return p.err
	}
	p.next++
	id := p.next
	p.pending[id] = ch
	p.mu.Unlock()
	req, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return fmt.Errorf("cdp: %s: %w", method, err)
	}
	p.wmu.Lock()
	err = websocket.Message.Send(p.ws, string(req))
	p.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("cdp: %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			p.mu.Lock()
			defer p.mu.Unlock()
			return fmt.Errorf("cdp: %s: %w", method, p.err)
		}
		if m.Error != nil {
			return fmt.Errorf("cdp: %s: %d %s", method, m.Error.Code, m.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("cdp: %s: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return ctx.Err()
	}
}

// Navigate loads url and waits until the document finished loading.
func (p *Page) Navigate(ctx context.Context, url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.Call(ctx, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("cdp: navigate %s: %s", url, r.ErrorText)
	}
	for {
		var state string
		if err := p.Eval(ctx, "document.URL === "+strconv.Quote(url)+" ? document.readyState : 'navigating'", &state); err == nil && state == "complete" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise) and decodes its
// value, returned by value as JSON, into result (if not nil). A thrown exception is an error.
func (p *Page) Eval(ctx context.Context, expr string, result any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.Call(ctx, "Runtime.evaluate", map[string]any{
		"expression": expr, "returnByValue": true, "awaitPromise": true,
	}, &r)
	if err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		msg := e.Text
		if e.Exception != nil {
			msg = e.Exception.Description
		}
		return fmt.Errorf("cdp: evaluate %q: %s", expr, msg)
	}
	if result != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, result)
	}
	return nil
}

// Screenshot captures the whole page (beyond the viewport) as PNG.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var m struct {
		CSSContentSize struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := p.Call(ctx, "Page.getLayoutMetrics", nil, &m); err != nil {
		return nil, err
	}
	var r struct {
		Data string `json:"data"`
	}
	params := map[string]any{"format": "png", "captureBeyondViewport": true}
	if m.CSSContentSize.Width > 0 && m.CSSContentSize.Height > 0 {
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": m.CSSContentSize.Height, "scale": 1}
	}
	if err := p.Call(ctx, "Page.captureScreenshot", params, &r); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return nil, fmt.Errorf("cdp: screenshot: %w", err)
	}
	return png, nil
}

// Close closes the WebSocket and waits for the reader to stop.
func (p *Page) Close() error {
	err := p.ws.Close()
	<-p.done
	return err
}
