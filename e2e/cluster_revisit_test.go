package e2e

import (
	"bufio"
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/simweb"
)

// revisitWeb: 18 plain hosts, 15 of them binary hosts serving one set of files
// (SharedBinaries): the same PDF, mislabeled PDF, PNG and binary .html under one path on
// every binary host, hosts the ring spreads over all three members.
func revisitWeb(c *simweb.Config) {
	plainWeb(c)
	c.Hosts = 18
	c.Seed = 37
	c.MeanPages = 6
	c.BinaryHosts = 15
	c.SharedBinaries = true
	c.CrawlDelayHosts = 0
}

// TestClusterRevisits: three members crawl a web where one payload is served on many
// hosts owned by different members, extraction on. Judged from the WARC files on the
// three disks: per payload, the first capture anywhere is the one full response and every
// later one is a revisit record (identical-payload-digest) whose WARC-Refers-To-Target-URI
// and -Date name a response with that payload in some member's WARC; a payload with more
// than one full response is allowed only as far as the members' counters (fallbacks, lost
// races, failed registrations) account for it; some revisits refer to an original on
// another member. Every fetched copy has one corpus record,
// the copies after the first marked duplicates.
func TestClusterRevisits(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	w, addr := web(t, revisitWeb)
	args := slices.DeleteFunc(clusterArgs(addr, 0, 30*time.Second), func(a string) bool { return a == "--no-extract" })
	args = append(args, "--log-level", "info")
	cr := newClusterRun(t, args)
	start := time.Now()
	cr.addThree(seedsFile(t, w))
	cr.waitAll(3 * time.Minute)
	rep := w.Report(reportOptions(0))
	checkClean(t, rep, logDuplicates(t, w, rep))
	t.Logf("3 nodes crawled in %s", time.Since(start).Round(time.Millisecond))

	type capture struct {
		node, url, digest, kind string
		date                    time.Time
		refURI                  string
		refDate                 time.Time
	}
	var caps []capture
	for _, n := range cr.nodes {
		files, _ := filepath.Glob(filepath.Join(n.data, "warc", "*.warc.gz"))
		for _, f := range files {
			err := readWARCFile(f, true, func(r *warcRec) error {
				if r.Type() != "response" && r.Type() != "revisit" {
					return nil
				}
				u := r.Get("WARC-Target-URI")
				if !strings.Contains(u, "/files/") && !strings.Contains(u, "/img/") && !strings.Contains(u, "/bin/") && !strings.Contains(u, "/mislabeled/") {
					return nil
				}
				if !strings.Contains(string(r.Block[:min(len(r.Block), 16)]), " 200") {
					return nil
				}
				c := capture{node: n.name, url: u, digest: r.Get("WARC-Payload-Digest"), kind: r.Type()}
				c.date, _ = time.Parse(time.RFC3339Nano, r.Get("WARC-Date"))
				if c.kind == "revisit" {
					if p := r.Get("WARC-Profile"); !strings.HasSuffix(p, "/revisit/identical-payload-digest") {
						t.Errorf("%s: revisit profile %q", u, p)
					}
					c.refURI = r.Get("WARC-Refers-To-Target-URI")
					c.refDate, _ = time.Parse(time.RFC3339Nano, r.Get("WARC-Refers-To-Date"))
				}
				caps = append(caps, c)
				return nil
			})
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}

	// Group by payload; the planted groups are the payloads served on several hosts.
	byDigest := map[string][]capture{}
	for _, c := range caps {
		byDigest[c.digest] = append(byDigest[c.digest], c)
	}
	type key struct {
		url  string
		date int64
	}
	responses := map[key]capture{}
	for _, c := range caps {
		if c.kind == "response" {
			responses[key{c.url, c.date.UnixNano()}] = c
		}
	}
	groups, extraFull, revisits, crossNode := 0, 0, 0, 0
	for d, cs := range byDigest {
		hosts := map[string]bool{}
		fullURLs := map[string]bool{}
		for _, c := range cs {
			if pu, err := url.Parse(c.url); err == nil {
				hosts[pu.Host] = true
			}
			if c.kind == "response" {
				fullURLs[c.url] = true
			}
		}
		if len(hosts) < 2 {
			continue
		}
		groups++
		if len(fullURLs) == 0 {
			t.Errorf("payload %s: no full response among %d captures", d, len(cs))
		}
		extraFull += max(0, len(fullURLs)-1)
		for _, c := range cs {
			if c.kind != "revisit" {
				continue
			}
			revisits++
			orig, ok := responses[key{c.refURI, c.refDate.UnixNano()}]
			switch {
			case !ok:
				t.Errorf("%s (on %s): revisit refers to %s at %s, which no member's WARC holds as a response", c.url, c.node, c.refURI, c.refDate.Format(time.RFC3339Nano))
			case orig.digest != c.digest:
				t.Errorf("%s: revisit of %s refers to %s with payload %s", c.url, c.digest, c.refURI, orig.digest)
			case orig.node != c.node:
				crossNode++
			}
		}
	}
	fallbacks := payloadFallbacks(t, cr)
	t.Logf("payload groups %d, captures %d, revisits %d (original on another member: %d), extra full responses %d, counted fallbacks %+v",
		groups, len(caps), revisits, crossNode, extraFull, fallbacks)
	if groups < 4 {
		t.Fatalf("only %d payloads on several hosts were archived: the web must plant them", groups)
	}
	if crossNode == 0 {
		t.Errorf("no revisit refers to an original another member archived")
	}
	counted := fallbacks["fallback_timeout"] + fallbacks["fallback_error"] + fallbacks["lost_race"] + fallbacks["register_failed"]
	if int64(extraFull) > counted {
		t.Errorf("%d full responses beyond one per payload, but the members counted only %d fallbacks", extraFull, counted)
	}
	// Copies fetched in the same instant on different members are all written in full
	// (each asked before any was registered): the first wave of this web fetches every
	// host's files at once, so only a share of the copies can be revisits here.
	if revisits == 0 {
		t.Errorf("none of %d captures of shared payloads is a revisit", len(caps))
	}

	// The corpus: every fetched PDF copy has one record; a revisit's is a duplicate.
	records := map[string][]corpus.Record{}
	for _, n := range cr.nodes {
		err := corpus.ReadShards(filepath.Join(n.data, "corpus"), func(r corpus.Record) error {
			records[canon(r.URL)] = append(records[canon(r.URL)], r)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: read corpus: %v", n.name, err)
		}
	}
	pdfs := 0
	for _, c := range caps {
		if !strings.Contains(c.url, "/files/1.pdf") {
			continue
		}
		pdfs++
		rs := records[canon(c.url)]
		if len(rs) != 1 {
			t.Errorf("%s: %d corpus records, want 1", c.url, len(rs))
			continue
		}
		if c.kind == "revisit" && rs[0].DuplicateOf == "" {
			t.Errorf("%s: a revisit of %s, but its record is no duplicate", c.url, c.refURI)
		}
	}
	if pdfs == 0 {
		t.Error("no shared PDF was archived")
	}
}

// payloadFallbacks sums the members' "payload decisions" log lines (written at exit).
func payloadFallbacks(t *testing.T, cr *clusterRun) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range cr.nodes {
		found := false
		sc := bufio.NewScanner(strings.NewReader(n.c.stderr.String()))
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil || m["msg"] != "payload decisions" {
				continue
			}
			found = true
			for k, v := range m {
				if f, ok := v.(float64); ok {
					out[k] += int64(f)
				}
			}
		}
		if !found {
			t.Errorf("%s: no payload decisions logged at exit", n.name)
		}
	}
	return out
}
