package node

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/simweb"
)

// TestSinglePayloadsInProcess: one node crawling a web whose binary hosts serve the same
// files decides every payload in process (no request to anyone), and every revisit
// record it writes refers to a response record with that payload in its own WARC; more
// than one full record for a payload only as far as its counters account for it.
func TestSinglePayloadsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process crawl")
	}
	cfg := simweb.DefaultConfig()
	cfg.Hosts, cfg.Seed, cfg.MeanPages, cfg.MaxWords = 6, 5, 6, 300
	cfg.CrawlDelayHosts, cfg.BinaryHosts, cfg.SharedBinaries = 0, 5, true
	w, rule := startSimweb(t, cfg)
	tc := newTestCluster(t, 1, rule, 0, func(nc *Config) {
		nc.ExitWhenDone, nc.Seeds, nc.NoExtract = true, w.Seeds(), true
	})
	n := tc.nodes[0]
	tc.lead()
	tc.wait(2 * time.Minute)

	type capture struct{ url, digest, kind, refURI string }
	responses := map[string]string{} // url + date -> digest
	var revisits []capture
	fullURLs := map[string]map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(n.dir.WARCDir(), "*.warc.gz"))
	for _, f := range files {
		err := archive.Scan(f, func(_ int64, r *archive.Record) error {
			if r.HTTPStatus != 200 || !strings.Contains(r.TargetURI, "/files/") && !strings.Contains(r.TargetURI, "/img/") && !strings.Contains(r.TargetURI, "/bin/") {
				return nil
			}
			d := r.Headers["WARC-Payload-Digest"]
			switch r.Type {
			case "response":
				responses[r.TargetURI+" "+r.Date.UTC().Format(time.RFC3339Nano)] = d
				if fullURLs[d] == nil {
					fullURLs[d] = map[string]bool{}
				}
				fullURLs[d][r.TargetURI] = true
			case "revisit":
				ref, _ := time.Parse(time.RFC3339Nano, r.Headers["WARC-Refers-To-Date"])
				revisits = append(revisits, capture{url: r.TargetURI, digest: d, kind: r.Type, refURI: r.Headers["WARC-Refers-To-Target-URI"] + " " + ref.UTC().Format(time.RFC3339Nano)})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range revisits {
		if got, ok := responses[c.refURI]; !ok || got != c.digest {
			t.Errorf("%s: revisit refers to %q, which is no response with payload %s here", c.url, c.refURI, c.digest)
		}
	}
	extra := 0
	for _, us := range fullURLs {
		extra += len(us) - 1
	}
	st := n.payloads.Stats()
	t.Logf("revisits %d, payloads %d, extra full records %d; lookups %d (local %d), lost races %d, fallbacks %d/%d, requests %d",
		len(revisits), len(fullURLs), extra, st.Lookups.Load(), st.LocalLookups.Load(), st.LostRace.Load(), st.FallbackTimeout.Load(), st.FallbackError.Load(), st.Requests.Load())
	if len(revisits) == 0 {
		t.Error("no revisit record written for the shared files")
	}
	if st.Requests.Load() != 0 || st.LocalLookups.Load()+st.FallbackError.Load() != st.Lookups.Load() || st.LocalLookups.Load() == 0 {
		t.Errorf("a single node left the process: lookups %d, local %d, requests %d", st.Lookups.Load(), st.LocalLookups.Load(), st.Requests.Load())
	}
	if counted := st.LostRace.Load() + st.FallbackError.Load() + st.RegisterFailed.Load(); int64(extra) > counted {
		t.Errorf("%d extra full records, %d counted", extra, counted)
	}
}
