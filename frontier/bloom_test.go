package frontier

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitBloomSettled waits until no sub-filter is over its size or being rebuilt.
func waitBloomSettled(t testing.TB, f *Frontier) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := 0
		f.bloomMu.RLock()
		for i := range f.bloom.subs {
			if s := &f.bloom.subs[i]; s.due || s.rebuilding {
				busy++
			}
		}
		f.bloomMu.RUnlock()
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sub-filters still due or rebuilding", busy)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The filter grows in steps of 1.2x per sub-filter while Adds go on, stays under 1.5
// bytes per URL held, keeps its false-positive rate, and never answers "new" for a URL
// whose Add returned, not even for URLs added while their sub-filter was being rebuilt
// (the hook adds some in both windows of growSub: after its log started and after its scan).
func TestBloomGrowsInSmallStepsWithoutFalseNegatives(t *testing.T) {
	const minPerSub = 32
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1,
		ExpectedURLs: bloomSubs * minPerSub})
	var (
		mu        sync.Mutex
		committed [][16]byte
		windowed  atomic.Int64
		next      atomic.Int64
	)
	urlOf := func(i int64) string { return fmt.Sprintf("http://h%d.bloom.test/p/%d", i%7, i) }
	addOne := func(url string) {
		r, err := f.Add([]Candidate{{URL: url}})
		if err != nil || r.Added != 1 {
			t.Errorf("add %s: %+v %v", url, r, err)
			return
		}
		mu.Lock()
		committed = append(committed, URLHash(url))
		mu.Unlock()
	}
	// In the hook, add URLs whose hash falls into the very sub-filter being rebuilt.
	f.bloomHook = func(stage string, sub byte) {
		if windowed.Load() >= 300 {
			return
		}
		for k := 0; k < 2; {
			url := urlOf(1<<40 + next.Add(1))
			if URLHash(url)[0] != sub {
				continue
			}
			addOne(url)
			windowed.Add(1)
			k++
		}
	}

	stop := make(chan struct{})
	var checkerErr atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // checks committed URLs while sub-filters are swapped under it
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			n := len(committed)
			var h [16]byte
			if n > 0 {
				h = committed[(i*7919)%n]
			}
			mu.Unlock()
			if i%64 == 0 {
				time.Sleep(50 * time.Microsecond) // leave the CPU to the adds
			}
			if n == 0 {
				continue
			}
			f.bloomMu.RLock()
			ok := f.bloom.test(h)
			f.bloomMu.RUnlock()
			if !ok {
				checkerErr.Store(fmt.Sprintf("false negative for %x", h))
				return
			}
		}
	}()

	const n = 21_000 // a multiple of the batch
	batch := make([]Candidate, 0, 300)
	for i := int64(0); i < n; i++ {
		batch = append(batch, Candidate{URL: urlOf(i)})
		if len(batch) == cap(batch) {
			r := mustAdd(t, f, batch...)
			if r.Added != len(batch) {
				t.Fatalf("batch at %d: %+v", i, r)
			}
			mu.Lock()
			for _, c := range batch {
				committed = append(committed, URLHash(c.URL))
			}
			mu.Unlock()
			batch = batch[:0]
		}
	}
	waitBloomSettled(t, f)
	close(stop)
	wg.Wait()
	if e := checkerErr.Load(); e != nil {
		t.Fatal(e)
	}
	if windowed.Load() == 0 {
		t.Fatal("no URL was added during a rebuild: the hook never ran")
	}
	f.bloomMu.RLock()
	for _, h := range committed {
		if !f.bloom.test(h) {
			f.bloomMu.RUnlock()
			t.Fatalf("false negative for %x after the rebuilds", h)
		}
	}
	minCap, maxCap := f.bloom.subs[0].cap, f.bloom.subs[0].cap
	for i := range f.bloom.subs {
		minCap, maxCap = min(minCap, f.bloom.subs[i].cap), max(maxCap, f.bloom.subs[i].cap)
	}
	f.bloomMu.RUnlock()
	st := f.Stats()
	per := float64(st.BloomBytes) / float64(st.Seen)
	t.Logf("seen %d (%d added during rebuilds), Bloom %d bytes = %.3f bytes/URL, sub-filter sizes %d..%d",
		st.Seen, windowed.Load(), st.BloomBytes, per, minCap, maxCap)
	if st.Seen != n+int(windowed.Load()) {
		t.Fatalf("seen %d, want %d", st.Seen, n+windowed.Load())
	}
	if minCap <= minPerSub {
		t.Fatalf("a sub-filter never grew: sizes %d..%d", minCap, maxCap)
	}
	if per > 1.5 {
		t.Fatalf("%.3f Bloom bytes per URL held, want <= 1.5", per)
	}
	// The false-positive rate holds: fresh URLs test "maybe" about 1% of the time.
	fp := 0
	f.bloomMu.RLock()
	for i := 0; i < 100_000; i++ {
		if f.bloom.test(URLHash(urlOf(1<<50 + int64(i)))) {
			fp++
		}
	}
	f.bloomMu.RUnlock()
	if rate := float64(fp) / 100_000; rate > 0.015 {
		t.Fatalf("false-positive rate %.4f, want about 0.01", rate)
	} else {
		t.Logf("false-positive rate %.4f", rate)
	}
}

// Reopening sizes every sub-filter for its share of the seen keys: at most 1.44 bytes per
// URL held right away, and every seen URL tests "maybe".
func TestBloomReopenSizedForSeen(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	cfg := Config{DB: db, DefaultDelaySet: true, MaxPagesPerHost: -1, GeneratedBudget: -1, ExpectedURLs: bloomSubs}
	f, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var all []Candidate
	// 100,000 URLs, about 390 per sub-filter: with 10,000 (39 each) a tenth of the
	// sub-filters get over 1.2 times their share by chance and grow, to 1.47 bytes a URL.
	for i := 0; i < 100_000; i++ {
		all = append(all, Candidate{URL: fmt.Sprintf("http://h%d.reopen.test/%d", i%7, i)})
	}
	for i := 0; i < len(all); i += 5000 {
		mustAdd(t, f, all[i:i+5000]...)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g := openF(t, cfg)
	// Sub-filters that got more than their share grow in the background (1.2 x what they
	// hold): measure once that is done, not at a moment that depends on the machine's load.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		busy := false
		g.bloomMu.RLock()
		for i := range g.bloom.subs {
			busy = busy || g.bloom.subs[i].due || g.bloom.subs[i].rebuilding
		}
		g.bloomMu.RUnlock()
		if !busy {
			break
		}
	}
	st := g.Stats()
	per := float64(st.BloomBytes) / float64(st.Seen)
	t.Logf("seen %d, %.3f bytes per URL", st.Seen, per)
	if st.Seen != len(all) || per > 1.45 || per < 1.1 {
		t.Fatalf("seen %d, %.3f bytes per URL", st.Seen, per)
	}
	g.bloomMu.RLock()
	defer g.bloomMu.RUnlock()
	for _, c := range all {
		if !g.bloom.test(URLHash(c.URL)) {
			t.Fatalf("false negative for %s after reopen", c.URL)
		}
	}
}
