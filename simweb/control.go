package simweb

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HostProfile describes the behaviours of one host (ground truth for tests and humans).
type HostProfile struct {
	Host       string   `json:"host"`
	Pages      int      `json:"pages"` // article pages + home
	Robots     string   `json:"robots"`
	CrawlDelay string   `json:"crawl_delay,omitempty"`
	Sitemap    string   `json:"sitemap,omitempty"`
	MirrorOf   string   `json:"mirror_of,omitempty"`
	Features   []string `json:"features,omitempty"`
	TrapURLs   []string `json:"trap_entries,omitempty"`
	Extras     []string `json:"extras,omitempty"`
}

// Hosts returns every host's profile.
func (w *Web) Hosts() []HostProfile {
	out := make([]HostProfile, len(w.hosts))
	for i, h := range w.hosts {
		p := HostProfile{Host: h.name, Pages: h.pages, Robots: h.robots.String(), TrapURLs: w.trapEntries(h)}
		if h.robots == robotsDelay {
			p.CrawlDelay = w.cfg.CrawlDelay.String()
		}
		switch h.sitemap {
		case 1:
			p.Sitemap = "http://" + h.name + "/sitemap.xml"
		case 2:
			p.Sitemap = "http://" + h.name + "/sitemap_index.xml"
		}
		if h.mirrorOf >= 0 {
			p.MirrorOf = w.hosts[h.mirrorOf].name
		}
		for f, n := range featureNames {
			if h.has(f) {
				p.Features = append(p.Features, n)
			}
		}
		sort.Strings(p.Features)
		for _, e := range w.extras(h) {
			p.Extras = append(p.Extras, w.url(h, e))
		}
		out[i] = p
	}
	return out
}

// optionsFromQuery reads ReportOptions from ua, delay, per_host, tolerance, max_depth, seeds
// (seeds: comma-separated URLs). Durations accept Go syntax ("250ms") or seconds ("0.25").
func optionsFromQuery(r *http.Request) ReportOptions {
	q := r.URL.Query()
	dur := func(s string) time.Duration {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(f * float64(time.Second))
		}
		return 0
	}
	o := ReportOptions{UserAgent: q.Get("ua"), DefaultDelay: dur(q.Get("delay")), Tolerance: dur(q.Get("tolerance"))}
	o.PerHost, _ = strconv.Atoi(q.Get("per_host"))
	o.MaxDepth, _ = strconv.Atoi(q.Get("max_depth"))
	if s := q.Get("seeds"); s != "" {
		o.Seeds = strings.Split(s, ",")
	}
	return o
}

// control serves /_simweb/: report, mustreach, log, reset, page, seeds, hosts, duplicates,
// freshness, pagerank.
func (w *Web) control(rw http.ResponseWriter, r *http.Request) {
	js := func(v any) {
		rw.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(rw)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	}
	text := func(lines []string) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Write([]byte(strings.Join(lines, "\n") + "\n"))
	}
	switch strings.TrimPrefix(r.URL.Path, "/_simweb/") {
	case "report":
		js(w.Report(optionsFromQuery(r)))
	case "mustreach":
		text(w.MustReach(optionsFromQuery(r)))
	case "log":
		js(w.Log())
	case "reset":
		if r.Method != http.MethodPost {
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		w.ResetLog()
		js(map[string]bool{"ok": true})
	case "page":
		pi, ok := w.Page(r.URL.Query().Get("url"))
		if !ok {
			rw.WriteHeader(http.StatusNotFound)
		}
		js(pi)
	case "seeds":
		text(w.Seeds())
	case "hosts":
		js(w.Hosts())
	case "duplicates":
		js(map[string][][]string{"exact": w.ExactDuplicateGroups(), "near": w.NearDuplicateGroups()})
	case "freshness":
		// from, to: RFC 3339 (default: the first request, now); min: a duration.
		q := r.URL.Query()
		from, _ := time.Parse(time.RFC3339Nano, q.Get("from"))
		to, err := time.Parse(time.RFC3339Nano, q.Get("to"))
		if err != nil {
			to = w.cfg.Clock()
		}
		if from.IsZero() {
			if l := w.Log(); len(l) > 0 {
				from = l[0].Arrival
			}
		}
		minIv, _ := time.ParseDuration(q.Get("min"))
		js(w.Freshness(from, to, minIv))
	case "pagerank":
		f, err := strconv.ParseFloat(r.URL.Query().Get("fraction"), 64)
		if err != nil || f <= 0 || f > 1 {
			f = 0.1
		}
		js(w.PageRankShare(optionsFromQuery(r), f))
	default:
		http.Error(rw, "endpoints: report mustreach log reset(POST) page?url= seeds hosts duplicates freshness?from=&to=&min= pagerank?fraction=", http.StatusNotFound)
	}
}
