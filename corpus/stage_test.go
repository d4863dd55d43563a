package corpus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/internal/clustertest"
)

// site is a set of pages served by a test Load func.
type site struct {
	mu    sync.Mutex
	pages map[string]string
	loads map[string]int
}

func newSite() *site { return &site{pages: map[string]string{}, loads: map[string]int{}} }

func (s *site) add(url, body string) { s.pages[url] = body }

func (s *site) load(ctx context.Context, j Job) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads[j.URL]++
	b, ok := s.pages[j.URL]
	if !ok {
		return nil, fmt.Errorf("no WARC record for %s", j.URL)
	}
	return []byte(b), nil
}

func testConfig(db *badger.DB, dir string, st *site) Config {
	return Config{
		DB: db, OutDir: dir, NodeName: "n1", Workers: 2, Load: st.load,
		CommitInterval: 50 * time.Millisecond,
	}
}

func jobFor(url string, i int) Job {
	return Job{
		URL: url, Status: 200, ContentType: "text/html; charset=utf-8",
		FetchTime: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC), WARCFile: "n1-00001.warc.gz", WARCOffset: int64(i * 1000),
	}
}

func runToEnd(t *testing.T, cfg Config, jobs []Job) *Stage {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(jobs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func readAll(t *testing.T, dir string) []Record {
	t.Helper()
	var out []Record
	if err := ReadShards(dir, func(r Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStageEndToEnd(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	articles := map[string][]string{}
	for i := 0; i < 24; i++ {
		url := fmt.Sprintf("http://h%d.sim.test/article", i)
		paras := genParagraphs(uint64(1000+i), 10, 60)
		articles[url] = paras
		st.add(url, genPage(fmt.Sprintf("Article %d", i), paras, pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	// Exact duplicate: article 0's text under another URL with other chrome and title case.
	st.add("http://mirror.sim.test/copy", genPage("Article 0", articles["http://h0.sim.test/article"], pageOpts{navLinks: 7}))
	// Near duplicate: article 1 with one word changed.
	near := append([]string(nil), articles["http://h1.sim.test/article"]...)
	near[4] = strings.Replace(near[4], " ", " zebra ", 1)
	if d := Hamming(SimHash(strings.Join(near, " ")), SimHash(strings.Join(articles["http://h1.sim.test/article"], " "))); d > NearMaxDistance || d == 0 {
		t.Fatalf("test data: the edited article is at distance %d", d)
	}
	st.add("http://mirror.sim.test/edited", genPage("Article 1", near, pageOpts{}))
	st.add("http://h1.sim.test/noai", genPage("Opted out", genParagraphs(77, 8, 60), pageOpts{}))
	st.add("http://h2.sim.test/links", genPage("Links", linkParagraphs(78, 4, 40, 1), pageOpts{navLinks: 300}))
	for i, u := range []string{"http://mirror.sim.test/copy", "http://mirror.sim.test/edited", "http://h1.sim.test/noai", "http://h2.sim.test/links", "http://h3.sim.test/missing"} {
		j := jobFor(u, 100+i)
		if strings.HasSuffix(u, "/noai") {
			j.XRobotsTag = []string{"noai"}
		}
		jobs = append(jobs, j)
	}
	notFound := jobFor("http://h4.sim.test/404", 200)
	notFound.Status = 404
	jobs = append(jobs, notFound)

	s := runToEnd(t, testConfig(db, dir, st), jobs)

	recs := readAll(t, dir)
	if len(recs) != len(jobs) {
		t.Fatalf("%d records for %d jobs", len(recs), len(jobs))
	}
	byURL := map[string]Record{}
	for _, r := range recs {
		if _, dup := byURL[r.URL]; dup {
			t.Fatalf("two records for %s", r.URL)
		}
		byURL[r.URL] = r
	}
	keptChars, visibleChars := 0, 0
	for url, paras := range articles {
		r := byURL[url]
		if !r.Kept() {
			t.Errorf("%s not kept: rejected %q dup %q", url, r.Rejected, r.DuplicateOf)
			continue
		}
		for _, p := range paras {
			if !strings.Contains(r.Text, p) {
				t.Errorf("%s: paragraph missing from text: %.40q", url, p)
			}
		}
		for _, m := range []string{navMarker, footerMarker, sidebarMarker, cookieMarker} {
			if strings.Contains(r.Text, m) {
				t.Errorf("%s: boilerplate %q in text", url, m)
			}
		}
		if r.WARCFile == "" || r.FetchTime.IsZero() || r.Language != "en" || r.ContentHash == "" || len(r.SimHash) != 16 {
			t.Errorf("%s: incomplete record %+v", url, r)
		}
		keptChars += countNonSpace(r.Text)
		visibleChars += r.Quality.VisibleChars
	}
	t.Logf("article pages: kept %.1f%% of visible characters, dropped %.1f%% as boilerplate",
		100*float64(keptChars)/float64(visibleChars), 100-100*float64(keptChars)/float64(visibleChars))

	want := map[string]struct{ rejected, dupOf, kind string }{
		"http://mirror.sim.test/copy":   {"", "http://h0.sim.test/article", DupExact},
		"http://mirror.sim.test/edited": {"", "http://h1.sim.test/article", DupNear},
		"http://h1.sim.test/noai":       {RejectOptOut, "", ""},
		"http://h2.sim.test/links":      {RejectLinkDensity, "", ""},
		"http://h3.sim.test/missing":    {RejectLoad, "", ""},
		"http://h4.sim.test/404":        {RejectStatus, "", ""},
	}
	for url, w := range want {
		r := byURL[url]
		if r.Rejected != w.rejected || r.DuplicateOf != w.dupOf || r.DuplicateKind != w.kind {
			t.Errorf("%s: rejected %q dup %q/%q, want %q %q/%q", url, r.Rejected, r.DuplicateOf, r.DuplicateKind, w.rejected, w.dupOf, w.kind)
		}
		if r.Text != "" {
			t.Errorf("%s: text present", url)
		}
	}
	if r := byURL["http://h1.sim.test/noai"]; len(r.OptOut) != 1 || r.OptOut[0] != OptOutNoAI {
		t.Errorf("opt-out signal not recorded: %v", r.OptOut)
	}
	if st.loads["http://h4.sim.test/404"] != 0 {
		t.Error("a 404 page was loaded back")
	}

	stats := s.Stats()
	if stats.Processed != int64(len(jobs)) || stats.Kept != 24 || stats.ExactDup != 1 || stats.NearDup != 1 || stats.OptedOut != 1 ||
		stats.Rejected[RejectLinkDensity] != 1 || stats.Rejected[RejectLoad] != 1 || stats.Rejected[RejectStatus] != 1 || stats.Rejected[RejectOptOut] != 1 || stats.Backlog != 0 {
		t.Errorf("stats %+v", stats)
	}
	if stats.PagesPerCoreSec <= 0 {
		t.Errorf("no rate: %+v", stats)
	}

	// Corpus bytes per page.
	var size int64
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if strings.HasSuffix(f, partialExt) {
			t.Errorf("shard left partial after shutdown: %s", f)
		}
		fi, _ := os.Stat(f)
		size += fi.Size()
	}
	t.Logf("corpus: %d records, %d bytes compressed, %.0f bytes/page", len(recs), size, float64(size)/float64(len(recs)))

	// Counters survive a restart.
	s2, err := New(testConfig(db, dir, st))
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Stats(); got.Processed != stats.Processed || got.Kept != stats.Kept {
		t.Errorf("stats after reopen %+v", got)
	}
	s2.Shutdown(context.Background())
}

func TestStageIncludeDuplicates(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	paras := genParagraphs(5, 6, 60)
	st.add("http://a.sim.test/", genPage("Same", paras, pageOpts{}))
	st.add("http://b.sim.test/", genPage("Same", paras, pageOpts{navLinks: 3}))
	cfg := testConfig(db, dir, st)
	cfg.Workers = 1 // arrival order = queue order
	cfg.Filters.IncludeDuplicates = true
	runToEnd(t, cfg, []Job{jobFor("http://a.sim.test/", 1), jobFor("http://b.sim.test/", 2)})
	recs := readAll(t, dir)
	if len(recs) != 2 || recs[1].DuplicateOf != "http://a.sim.test/" || recs[1].DuplicateKind != DupExact || recs[1].Text == "" || recs[1].Text != recs[0].Text {
		t.Fatalf("duplicate with text not written: %+v", recs)
	}
	// A refetch of the same URL with the same text is a duplicate of its earlier fetch; the same
	// fetch redone is not a duplicate of itself.
	s, _ := New(cfg)
	ctx := context.Background()
	s.Enqueue(jobFor("http://a.sim.test/", 3), jobFor("http://a.sim.test/", 1))
	s.Start(ctx)
	s.Drain(ctx)
	s.Shutdown(ctx)
	recs = readAll(t, dir)
	if len(recs) != 4 || recs[2].DuplicateOf != "http://a.sim.test/" || recs[3].DuplicateOf != "" {
		t.Fatalf("refetch / redo: %+v", recs[2:])
	}
}

var errCrash = errors.New("simulated crash")

func TestStageCrashRecovery(t *testing.T) {
	for _, c := range []struct {
		point   string
		at      int
		garbage bool
		// recoverLeft adds the .recover file a crash during an earlier recovery leaves.
		recoverLeft bool
	}{
		{"written", 10, false, false},    // records in the encoder's buffer are lost
		{"flushed", 3, false, false},     // records durable, jobs not yet deleted
		{"before_flush", 2, true, false}, // and a torn, unflushed tail in the file
		{"written", 1, false, false},     // before the first commit
		{"flushed", 1, true, false},
		{"flushed", 3, false, true},
	} {
		t.Run(fmt.Sprintf("%s-%d-%t", c.point, c.at, c.recoverLeft), func(t *testing.T) {
			db := openMemDB(t)
			dir := t.TempDir()
			st := newSite()
			var jobs []Job
			for i := 0; i < 40; i++ {
				url := fmt.Sprintf("http://h%d.sim.test/p", i)
				st.add(url, genPage(fmt.Sprintf("Page %d", i), genParagraphs(uint64(i), 5, 60), pageOpts{}))
				jobs = append(jobs, jobFor(url, i))
			}
			cfg := testConfig(db, dir, st)
			cfg.CommitEvery = 4
			cfg.CommitInterval = time.Hour
			s1, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := s1.Enqueue(jobs...); err != nil {
				t.Fatal(err)
			}
			n := 0
			s1.testHook = func(point string) error {
				if point == c.point {
					if n++; n == c.at {
						return errCrash
					}
				}
				return nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := s1.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s1.Drain(ctx); !errors.Is(err, errCrash) {
				t.Fatalf("drain after crash: %v", err)
			}
			if err := s1.Shutdown(ctx); !errors.Is(err, errCrash) {
				t.Fatalf("shutdown after crash: %v", err)
			}
			partials, _ := filepath.Glob(filepath.Join(dir, "*"+partialExt))
			if len(partials) != 1 {
				t.Fatalf("want one partial shard after the crash, have %v", partials)
			}
			before := readAll(t, dir)
			left := s1.Backlog()
			if len(before)+left < len(jobs) {
				t.Fatalf("lost work: %d records durable + %d queued < %d", len(before), left, len(jobs))
			}
			if c.garbage {
				f, _ := os.OpenFile(partials[0], os.O_APPEND|os.O_WRONLY, 0)
				f.Write([]byte("\x28\xb5\x2f\xfd garbage of a torn block"))
				f.Close()
			}
			if c.recoverLeft {
				final := strings.TrimSuffix(partials[0], partialExt)
				if err := os.WriteFile(final+recoverExt, []byte("half a recovered shard"), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			s2 := runToEnd(t, cfg, nil)
			recs := readAll(t, dir)
			seen := map[string]int{}
			for _, r := range recs {
				seen[r.URL]++
				if r.DuplicateOf != "" || r.Rejected != "" {
					t.Errorf("%s: dup %q rejected %q after redo", r.URL, r.DuplicateOf, r.Rejected)
				}
			}
			for _, j := range jobs {
				if seen[j.URL] != 1 {
					t.Errorf("%s: %d records", j.URL, seen[j.URL])
				}
			}
			if len(recs) != len(jobs) || s2.Backlog() != 0 {
				t.Errorf("%d records for %d jobs, backlog %d", len(recs), len(jobs), s2.Backlog())
			}
			if p, _ := filepath.Glob(filepath.Join(dir, "*"+partialExt)); len(p) != 0 {
				t.Errorf("partial shards left: %v", p)
			}
			t.Logf("durable before restart %d, queued %d, redone %d", len(before), left, len(jobs)-len(before))
		})
	}
}

func TestStageShardRotation(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	for i := 0; i < 30; i++ {
		url := fmt.Sprintf("http://h%d.sim.test/r", i)
		st.add(url, genPage("R", genParagraphs(uint64(500+i), 5, 60), pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	cfg := testConfig(db, dir, st)
	cfg.ShardMaxBytes = 8 << 10
	cfg.CommitEvery = 3
	cfg.CommitInterval = time.Hour
	s := runToEnd(t, cfg, jobs)
	names, err := shardFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 4 {
		t.Fatalf("want several shards, have %v", names)
	}
	total := 0
	for i, name := range names {
		if name != ShardName("n1", i) {
			t.Errorf("shard %d named %s", i, name)
		}
		lines := 0
		var size int
		if err := readShardLines(filepath.Join(dir, name), false, func(l []byte) error { lines++; size += len(l); return nil }); err != nil {
			t.Fatal(err)
		}
		if i < len(names)-1 && size < int(cfg.ShardMaxBytes) {
			t.Errorf("%s rotated at %d bytes", name, size)
		}
		if size > int(cfg.ShardMaxBytes)+cfg.CommitEvery*4000 {
			t.Errorf("%s holds %d bytes", name, size)
		}
		total += lines
	}
	if total != len(jobs) || len(readAll(t, dir)) != len(jobs) {
		t.Errorf("%d lines for %d jobs", total, len(jobs))
	}
	if s.Stats().Shards < len(names)-1 {
		t.Errorf("stats count %d shards", s.Stats().Shards)
	}
	// The next run continues the numbering.
	st.add("http://late.sim.test/", genPage("L", genParagraphs(9, 5, 60), pageOpts{}))
	runToEnd(t, cfg, []Job{jobFor("http://late.sim.test/", 99)})
	names2, _ := shardFiles(dir)
	if len(names2) != len(names)+1 || names2[len(names2)-1] != ShardName("n1", len(names)) {
		t.Errorf("after restart: %v", names2)
	}
}

func TestStageBacklogFull(t *testing.T) {
	db := openMemDB(t)
	cfg := testConfig(db, t.TempDir(), newSite())
	cfg.MaxBacklog = 3
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(jobFor("http://a/1", 1), jobFor("http://a/2", 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(jobFor("http://a/3", 3), jobFor("http://a/4", 4)); !errors.Is(err, ErrBacklogFull) {
		t.Fatalf("over the limit: %v", err)
	}
	if err := s.Enqueue(jobFor("http://a/3", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(jobFor("http://a/4", 4)); !errors.Is(err, ErrBacklogFull) {
		t.Fatalf("at the limit: %v", err)
	}
	if s.Backlog() != 3 {
		t.Fatalf("backlog %d", s.Backlog())
	}
	if err := s.Drain(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("drain before start: %v", err)
	}
	if err := s.Enqueue(Job{}); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("empty job: %v", err)
	}
	// Durable: a new stage on the same DB sees them.
	s.Shutdown(context.Background())
	if err := s.Enqueue(jobFor("http://a/5", 5)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after shutdown: %v", err)
	}
	s2, _ := New(cfg)
	if s2.Backlog() != 3 {
		t.Fatalf("backlog after reopen %d", s2.Backlog())
	}
}

func TestConfigValidate(t *testing.T) {
	db := openMemDB(t)
	ok := testConfig(db, t.TempDir(), newSite())
	cases := map[string]func(*Config){
		"no db":      func(c *Config) { c.DB = nil },
		"no dir":     func(c *Config) { c.OutDir = "" },
		"bad node":   func(c *Config) { c.NodeName = "a/b" },
		"no load":    func(c *Config) { c.Load = nil },
		"density":    func(c *Config) { c.Filters.MaxLinkDensity = 2 },
		"lang":       func(c *Config) { c.Filters.Languages = []string{"eng"} },
		"min length": func(c *Config) { c.Filters.MinTextLength = -1 },
		"nice":       func(c *Config) { c.Nice = IdleNice + 1 },
		"pdf memory": func(c *Config) { c.PDF.MaxMemory = 8 << 20 },
		"pdf memory below bytes": func(c *Config) {
			c.PDF.MaxBytes, c.PDF.MaxMemory = 100<<20, 64<<20
		},
	}
	for name, mod := range cases {
		c := ok
		mod(&c)
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
}

// TestStageDurable: after a commit the open shard's durable mark names the .partial file and
// covers every committed line; after Shutdown no shard is open.
func TestStageDurable(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	for i := 0; i < 6; i++ {
		url := fmt.Sprintf("http://d%d.sim.test/p", i)
		st.add(url, genPage("D", genParagraphs(uint64(700+i), 4, 50), pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	s, err := New(testConfig(db, dir, st))
	if err != nil {
		t.Fatal(err)
	}
	if s.Durable() != nil {
		t.Fatal("durable mark before any shard")
	}
	if err := s.Enqueue(jobs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	d := s.Durable()
	if d == nil || d.Name != ShardName("n1", 0)+partialExt || d.Size <= 0 {
		t.Fatalf("durable mark after drain: %+v", d)
	}
	b, err := os.ReadFile(filepath.Join(dir, d.Name))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) < d.Size {
		t.Fatalf("file holds %d bytes, mark says %d", len(b), d.Size)
	}
	prefix := filepath.Join(t.TempDir(), d.Name)
	if err := os.WriteFile(prefix, b[:d.Size], 0o644); err != nil {
		t.Fatal(err)
	}
	lines := 0
	if err := readShardLines(prefix, true, func([]byte) error { lines++; return nil }); err != nil {
		t.Fatal(err)
	}
	if lines != len(jobs) {
		t.Fatalf("durable prefix holds %d lines, want %d", lines, len(jobs))
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := s.Durable(); d != nil {
		t.Fatalf("durable mark after shutdown: %+v", d)
	}
}

// TestStageShardRotationByAge: an idle open shard older than ShardMaxAge is finished (renamed
// from .partial) by the commit loop alone, and the next record opens the next shard.
func TestStageShardRotationByAge(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	for i := 0; i < 2; i++ {
		st.add(fmt.Sprintf("http://age%d.sim.test/", i), genPage("A", genParagraphs(uint64(700+i), 5, 60), pageOpts{}))
	}
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cfg := testConfig(db, dir, st)
	cfg.ShardMaxAge = time.Minute
	cfg.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if err := s.Enqueue(jobFor("http://age0.sim.test/", 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if p, _ := filepath.Glob(filepath.Join(dir, "*"+partialExt)); len(p) != 1 {
		t.Fatalf("want one open shard, have %v", p)
	}
	now.Add(int64(time.Minute))
	clustertest.Eventually(t, 5*time.Second, "old shard finished", func() bool {
		_, err := os.Stat(filepath.Join(dir, ShardName("n1", 0)))
		return err == nil
	})
	if err := s.Enqueue(jobFor("http://age1.sim.test/", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	names, _ := shardFiles(dir)
	if len(names) != 2 || names[1] != ShardName("n1", 1) || len(readAll(t, dir)) != 2 {
		t.Fatalf("shards %v", names)
	}
}
