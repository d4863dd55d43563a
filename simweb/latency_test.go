package simweb

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strconv"
	"testing"
	"time"
)

// The latency profile: host medians and request latencies are log-normal around the
// configured median with a tail past 5 s; timeout and conn-limit hosts are assigned.
func TestLatencyProfile(t *testing.T) {
	w, err := New(InternetConfig(5000))
	if err != nil {
		t.Fatal(err)
	}
	var hostMed, req []float64
	timeouts := 0
	for i := 0; i < 5000; i++ {
		name := "h" + strconv.Itoa(i) + ".sim.test"
		m, rate, to, ok := w.HostLatency(name)
		if !ok || m <= 0 || rate <= 0 {
			t.Fatalf("%s: latency %v rate %d ok %v", name, m, rate, ok)
		}
		if to {
			timeouts++
		}
		hostMed = append(hostMed, m.Seconds())
		h, _, _ := w.hostFor(name)
		for k := 0; k < 20; k++ {
			req = append(req, w.requestLatency(h, "http://"+name+"/"+strconv.Itoa(k), 1).Seconds())
		}
	}
	sort.Float64s(hostMed)
	sort.Float64s(req)
	p := func(s []float64, q float64) float64 { return s[int(q*float64(len(s)-1))] }
	past5 := float64(len(req)-sort.SearchFloat64s(req, 5)) / float64(len(req))
	t.Logf("host medians p50 %.3fs p90 %.3fs p99 %.3fs; requests p50 %.3fs p90 %.3fs p99 %.3fs, past 5 s %.2f%%; timeout hosts %d",
		p(hostMed, .5), p(hostMed, .9), p(hostMed, .99), p(req, .5), p(req, .9), p(req, .99), 100*past5, timeouts)
	if m := p(req, .5); m < 0.25 || m > 0.36 {
		t.Errorf("request median %.3fs, want about 0.3s", m)
	}
	if past5 < 0.001 || past5 > 0.02 {
		t.Errorf("share past 5 s %.4f, want a long tail of 0.1%%..2%%", past5)
	}
	if timeouts != 100 {
		t.Errorf("timeout hosts %d, want 100 (2%%)", timeouts)
	}
	// Deterministic: the same URL and attempt wait the same.
	h, _, _ := w.hostFor("h7.sim.test")
	if a, b := w.requestLatency(h, "http://h7.sim.test/x", 2), w.requestLatency(h, "http://h7.sim.test/x", 2); a != b {
		t.Errorf("latency not deterministic: %v vs %v", a, b)
	}
}

// A request waits its first-byte latency; a timeout host never answers and the client's
// give-up is logged as a dropped request; a conn-limit host refuses a second connection.
func TestLatencyTimeoutConnLimit(t *testing.T) {
	c := InternetConfig(100)
	c.LatencyMedian, c.LatencyHostSigma, c.LatencyRequestSigma = 80*time.Millisecond, 0.01, 0.01
	c.TransferRateMedian = 0
	c.TimeoutHosts, c.ConnLimitHosts = 3, 5
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := w.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var timeoutHost, limitHost string
	for i := 0; i < 100; i++ {
		name := "h" + strconv.Itoa(i) + ".sim.test"
		h, _, _ := w.hostFor(name)
		if h.robots == robotsTimeout && timeoutHost == "" {
			timeoutHost = name
		}
		if h.has(fConnLimit) && limitHost == "" {
			limitHost = name
		}
	}
	if timeoutHost == "" || limitHost == "" {
		t.Fatalf("no timeout host (%q) or conn-limit host (%q)", timeoutHost, limitHost)
	}
	client := func() (*http.Client, *http.Transport) {
		tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
		return &http.Client{Transport: tr, Timeout: 2 * time.Second}, tr
	}
	a, ta := client()
	defer ta.CloseIdleConnections()
	b, tb := client()
	defer tb.CloseIdleConnections()

	f := get(a, "http://"+limitHost+"/")
	if f.err != nil || f.status != 200 || f.took < 70*time.Millisecond {
		t.Fatalf("first request: status %d err %v took %v, want 200 after ~80ms", f.status, f.err, f.took)
	}
	// a's connection is kept alive: b's connection is refused, a's is served again.
	if f := get(b, "http://"+limitHost+"/robots.txt"); f.err == nil {
		t.Fatalf("second connection served (status %d), want refused", f.status)
	}
	if f := get(a, "http://"+limitHost+"/robots.txt"); f.err != nil {
		t.Fatalf("same connection again: %v", f.err)
	}
	ta.CloseIdleConnections()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if f := get(b, "http://"+limitHost+"/robots.txt"); f.err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second client still refused after the first closed its connection")
		}
		time.Sleep(20 * time.Millisecond)
	}

	a.Timeout = 300 * time.Millisecond
	if f := get(a, "http://"+timeoutHost+"/robots.txt"); f.err == nil {
		t.Fatalf("timeout host answered %d", f.status)
	}
	time.Sleep(100 * time.Millisecond) // the handler sees the client leave
	rep := w.Report(ReportOptions{UserAgent: "crawlnode/0.1", PerHost: 1})
	if rep.ConnRefused < 1 {
		t.Errorf("conn refused %d, want >= 1", rep.ConnRefused)
	}
	if rep.StatusClasses["0xx"] < 2 {
		t.Errorf("dropped requests %d, want the refusal and the timeout", rep.StatusClasses["0xx"])
	}
	series := w.InFlight(50 * time.Millisecond)
	peak := 0.0
	for _, s := range series {
		peak = max(peak, s.InFlight)
	}
	// A one-at-a-time client sends its next request as soon as it has read the answer,
	// which can be a few milliseconds before the handler has returned under load: a fifth of a
	// step of slack (two requests at once for a whole step would read 2).
	if len(series) == 0 || peak <= 0 || peak > 1.2 {
		t.Errorf("in-flight series %d steps, peak %.2f; want one request at a time", len(series), peak)
	}
}
