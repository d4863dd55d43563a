package forward

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memDB opens an in-memory Badger closed at the end of the test.
func memDB(t testing.TB) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

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

var words = []string{"river", "stone", "cloud", "maple", "ember", "harbor", "quiet", "silver",
	"garden", "falcon", "winter", "lantern", "meadow", "copper", "orbit", "velvet", "canyon",
	"thistle", "beacon", "willow", "granite", "saffron", "tundra", "cobalt", "juniper", "prism",
	"summit", "hollow", "marble", "zephyr", "atlas", "bramble", "cinder", "delta", "fjord",
	"glacier", "heron", "indigo", "jasper", "kestrel", "lotus", "mosaic", "nectar", "onyx"}

var sections = []string{"blog", "news", "docs", "shop", "forum", "wiki"}

// simLinks generates n distinct simweb-like links over hosts hosts, in a shuffled
// (discovery-like) order, deterministically from seed.
func simLinks(n, hosts int, seed uint64) []Link {
	r := rand.New(rand.NewPCG(seed, 1))
	seen := make(map[string]bool, n)
	out := make([]Link, 0, n)
	for len(out) < n {
		h := fmt.Sprintf("http://h%d.sim.test", r.IntN(hosts))
		sec := sections[r.IntN(len(sections))]
		var u string
		switch k := r.IntN(100); {
		case k < 60:
			u = fmt.Sprintf("%s/%s/%d-%s-%s.html", h, sec, r.IntN(5000), words[r.IntN(len(words))], words[r.IntN(len(words))])
		case k < 72:
			u = fmt.Sprintf("%s/%s/?page=%d", h, sec, r.IntN(400))
		case k < 80:
			u = fmt.Sprintf("%s/tag/%s/", h, words[r.IntN(len(words))])
		case k < 86:
			u = fmt.Sprintf("%s/calendar/%04d/%02d/", h, 1990+r.IntN(60), 1+r.IntN(12))
		case k < 92:
			u = fmt.Sprintf("%s/%s/item-%d.html?color=%s&size=%d", h, sec, r.IntN(2000), words[r.IntN(len(words))], r.IntN(50))
		case k < 96:
			u = fmt.Sprintf("%s/hidden/%d.html", h, r.IntN(300))
		default:
			u = fmt.Sprintf("%s/session/%016x/index.html", h, r.Uint64())
		}
		if seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, Link{URL: u, Depth: uint16(1 + r.IntN(8)), Hops: uint16(r.IntN(3)), Priority: uint8(r.IntN(3))})
	}
	return out
}
