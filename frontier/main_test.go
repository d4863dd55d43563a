package frontier

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock is a settable clock for politeness tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// openDB opens Badger in memory (dir == "") or in dir, closed at test cleanup.
func openDB(t testing.TB, dir string) *badger.DB {
	t.Helper()
	opts := badger.DefaultOptions(dir).WithLogger(nil)
	if dir == "" {
		opts = opts.WithInMemory(true)
	}
	db, err := badger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openF(t testing.TB, cfg Config) *Frontier {
	t.Helper()
	f, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// tryNext leases a URL if one is ready now, else returns the wait poll computed.
func tryNext(t testing.TB, f *Frontier) (*Lease, time.Duration) {
	t.Helper()
	l, wait, _, err := f.poll()
	if err != nil {
		t.Fatal(err)
	}
	if l == nil {
		f.mu.Lock()
		f.waiters--
		f.mu.Unlock()
	}
	return l, wait
}

func mustAdd(t testing.TB, f *Frontier, cands ...Candidate) AddResult {
	t.Helper()
	r, err := f.Add(cands)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// addInBatches adds url(0) to url(n-1) in Adds of 1,000 (the last one shorter).
func addInBatches(t testing.TB, f *Frontier, n int, url func(i int) Candidate) {
	t.Helper()
	batch := make([]Candidate, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, url(i))
		if len(batch) == cap(batch) || i == n-1 {
			mustAdd(t, f, batch...)
			batch = batch[:0]
		}
	}
}

func mustDone(t testing.TB, f *Frontier, l *Lease, o Outcome) {
	t.Helper()
	if err := f.Done(l, o); err != nil {
		t.Fatal(err)
	}
}

func u(host, path string) Candidate { return Candidate{URL: "http://" + host + path} }

// drain leases and completes (Fetched) everything ready now, returning the URLs in order.
func drain(t testing.TB, f *Frontier) []string {
	t.Helper()
	var out []string
	for {
		l, _ := tryNext(t, f)
		if l == nil {
			return out
		}
		out = append(out, l.URL)
		mustDone(t, f, l, Outcome{Kind: Fetched, Status: 200})
	}
}

func noDelay(db *badger.DB) Config {
	return Config{DB: db, DefaultDelaySet: true, DefaultDelay: 0}
}

func urls(host string, n int) []Candidate {
	c := make([]Candidate, n)
	for i := range c {
		c[i] = u(host, fmt.Sprintf("/p%d", i))
	}
	return c
}
