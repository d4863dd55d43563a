package simweb

// The internet regime: per-host latency and transfer rate, hosts that never answer, hosts
// that serve one connection at a time, and the in-flight series a test judges throughput by.
//
// Latency model: host h's median first-byte latency is LatencyMedian * exp(LatencyHostSigma
// * Z_h); request r to h waits h's median * exp(LatencyRequestSigma * Z_r), capped at
// LatencyMax, with Z standard normal drawn from (seed, host) and (seed, host, canonical URL,
// how often that URL was asked): log-normal, as measured web latencies are, with a long tail
// (defaults 0.8 and 0.5: overall shape ~0.94, so ~0.4% of requests past 5 s at a 300 ms
// median). Transfer: the first 16 KiB of the body go at once, the rest after len/rate.

import (
	"context"
	"math"
	"net"
	"net/http"
	"sort"
	"time"
)

// normal turns two uniform draws into a standard normal (Box-Muller).
func (r *rng) normal() float64 {
	u1 := 1 - r.float() // (0,1]
	u2 := r.float()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// hostLatency draws a host's median latency and transfer rate.
func (w *Web) hostLatency(h *host) (time.Duration, int64) {
	c := w.cfg
	r := newRng(mix(uint64(c.Seed), 101, uint64(h.idx)))
	var lat time.Duration
	if c.LatencyMedian > 0 {
		lat = time.Duration(float64(c.LatencyMedian) * math.Exp(c.LatencyHostSigma*r.normal()))
		lat = min(lat, c.LatencyMax)
	}
	var rate int64
	if c.TransferRateMedian > 0 {
		rate = max(int64(float64(c.TransferRateMedian)*math.Exp(r.normal())), 1024)
	}
	return lat, rate
}

// requestLatency is the first-byte wait of one request (nth request for the URL, from 1).
func (w *Web) requestLatency(h *host, canonicalURL string, nth int) time.Duration {
	if h == nil || h.latency <= 0 {
		return 0
	}
	r := newRng(mix(uint64(w.cfg.Seed), 102, uint64(h.idx), strHash(canonicalURL), uint64(nth)))
	d := time.Duration(float64(h.latency) * math.Exp(w.cfg.LatencyRequestSigma*r.normal()))
	return min(d, w.cfg.LatencyMax)
}

// HostLatency returns a host's median first-byte latency and transfer rate (bytes/s; 0 =
// unlimited) and whether the host never answers. ok is false for unknown hosts.
func (w *Web) HostLatency(name string) (median time.Duration, rate int64, timeout, ok bool) {
	h, _, ok := w.hostFor(name)
	if !ok {
		return 0, 0, false, false
	}
	return h.latency, h.rate, h.robots == robotsTimeout, true
}

// pacedWriter delays the body beyond its first 16 KiB by len/rate.
type pacedWriter struct {
	*countingWriter
	ctx     context.Context
	w       *Web
	rate    int64
	written int64
}

const pacedFree = 16 << 10

func (p *pacedWriter) Write(b []byte) (int, error) {
	if p.rate <= 0 {
		return p.countingWriter.Write(b)
	}
	n := 0
	if free := pacedFree - p.written; free > 0 {
		k := int(min(free, int64(len(b))))
		m, err := p.countingWriter.Write(b[:k])
		n += m
		p.written += int64(m)
		if err != nil || k == len(b) {
			return n, err
		}
		p.countingWriter.Flush()
		b = b[k:]
	}
	if !p.w.sleep(p.ctx, time.Duration(float64(len(b))/float64(p.rate)*float64(time.Second))) {
		return n, context.Canceled
	}
	m, err := p.countingWriter.Write(b)
	p.written += int64(m)
	return n + m, err
}

// --- one connection at a time per ConnLimit host ---

type connKey struct{}

// connInfo is what the server knows about one accepted connection.
type connInfo struct{ host string } // host whose requests it carried ("" none yet); guarded by Web.connMu

// connContext tags each connection's requests with its connInfo.
func (w *Web) connContext(ctx context.Context, c net.Conn) context.Context {
	ci := &connInfo{}
	w.connMu.Lock()
	w.connOf[c] = ci
	w.connMu.Unlock()
	return context.WithValue(ctx, connKey{}, ci)
}

// connState releases a connection's claim on its host when it closes.
func (w *Web) connState(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	w.connMu.Lock()
	defer w.connMu.Unlock()
	ci, ok := w.connOf[c]
	if !ok {
		return
	}
	delete(w.connOf, c)
	if ci.host != "" && w.hostConn[ci.host] == ci {
		delete(w.hostConn, ci.host)
	}
}

// claimConn reports whether the request's connection may serve h: true when h has no other
// open connection (the connection then holds h until it closes).
func (w *Web) claimConn(r *http.Request, h *host) bool {
	ci, _ := r.Context().Value(connKey{}).(*connInfo)
	if ci == nil || h == nil || !h.has(fConnLimit) {
		return true
	}
	w.connMu.Lock()
	defer w.connMu.Unlock()
	if cur, ok := w.hostConn[h.name]; ok && cur != ci {
		return false
	}
	w.hostConn[h.name] = ci
	ci.host = h.name
	return true
}

// --- in flight as the server saw it ---

// InFlightSample is the server's view of one time step of a crawl.
type InFlightSample struct {
	// At is the step's start, from the first request's arrival.
	At time.Duration `json:"at"`
	// InFlight is the time-weighted mean number of requests being served during the step.
	InFlight float64 `json:"in_flight"`
	// ActiveHosts, at the step's end, counts hosts between their first request's arrival and their last
	// request's finish: hosts that still had work, whether ready or waiting.
	ActiveHosts int `json:"active_hosts"`
}

// InFlight returns the crawl's in-flight series in steps of step (default 1s), from the
// requests logged since the last ResetLog.
func (w *Web) InFlight(step time.Duration) []InFlightSample {
	if step <= 0 {
		step = time.Second
	}
	recs := w.Log()
	if len(recs) == 0 {
		return nil
	}
	type ev struct {
		t int64
		d int
	}
	evs := make([]ev, 0, 2*len(recs))
	first := map[string]int64{}
	last := map[string]int64{}
	t0 := recs[0].Arrival.UnixNano()
	for _, r := range recs {
		a, f := r.Arrival.UnixNano(), r.Finish.UnixNano()
		t0 = min(t0, a)
		evs = append(evs, ev{a, 1}, ev{f, -1})
		if v, ok := first[r.Host]; !ok || a < v {
			first[r.Host] = a
		}
		if v, ok := last[r.Host]; !ok || f > v {
			last[r.Host] = f
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
	var hostEvs []ev
	for h, a := range first {
		hostEvs = append(hostEvs, ev{a, 1}, ev{last[h], -1})
	}
	sort.Slice(hostEvs, func(i, j int) bool { return hostEvs[i].t < hostEvs[j].t })
	end := evs[len(evs)-1].t
	st := int64(step)
	var out []InFlightSample
	cur, i := 0, 0
	hosts, hi := 0, 0
	for b := t0; b < end; b += st {
		be := b + st
		area := 0.0
		prev := b
		for i < len(evs) && evs[i].t < be {
			area += float64(cur) * float64(evs[i].t-prev)
			prev = evs[i].t
			cur += evs[i].d
			i++
		}
		area += float64(cur) * float64(be-prev)
		for hi < len(hostEvs) && hostEvs[hi].t < be {
			hosts += hostEvs[hi].d
			hi++
		}
		out = append(out, InFlightSample{At: time.Duration(b - t0), InFlight: area / float64(st), ActiveHosts: hosts})
	}
	return out
}
