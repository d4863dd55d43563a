package dedup

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/ring"
	"github.com/dgraph-io/badger/v4"
)

// table is a fake lease table shared by the test's nodes.
type table struct {
	mu     sync.Mutex
	owner  [ring.PartitionCount]string
	epoch  [ring.PartitionCount]uint64
	held   [ring.PartitionCount]bool // a handoff holds the partition on its owner
	urls   map[string]string
	downed map[string]bool
}

func (tb *table) set(p uint16, owner string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.owner[p] = owner
	tb.epoch[p]++
}

// node is one member: a Badger, a Store, a server for Handler and a Decider.
type node struct {
	name  string
	tab   *table
	db    *badger.DB
	store *Store
	srv   *httptest.Server
	dec   *Decider
}

func (n *node) Self() string { return n.name }

func (n *node) OwnerOf(p uint16) (string, uint64) {
	n.tab.mu.Lock()
	defer n.tab.mu.Unlock()
	return n.tab.owner[p], n.tab.epoch[p]
}

func (n *node) WithLeases(ps map[uint16]uint64, fn func() error) ([]uint16, error) {
	n.tab.mu.Lock()
	var refused []uint16
	for p, e := range ps {
		if n.tab.owner[p] != n.name || n.tab.epoch[p] != e || n.tab.held[p] {
			refused = append(refused, p)
		}
	}
	n.tab.mu.Unlock()
	if len(refused) > 0 {
		return refused, nil
	}
	return nil, fn()
}

func (n *node) InternalURL(peer string) (string, bool) {
	n.tab.mu.Lock()
	defer n.tab.mu.Unlock()
	u, ok := n.tab.urls[peer]
	return u, ok
}

func (n *node) Do(req *http.Request) (*http.Response, error) { return http.DefaultClient.Do(req) }

func memDB(t testing.TB) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newCluster starts k nodes and deals the partitions round-robin.
func newCluster(t testing.TB, k int) (*table, []*node) {
	t.Helper()
	tab := &table{urls: map[string]string{}, downed: map[string]bool{}}
	var nodes []*node
	for i := 0; i < k; i++ {
		n := &node{name: fmt.Sprintf("n%d", i), tab: tab, db: memDB(t)}
		n.store = NewStore(n.db)
		h := Handler(n.store, n)
		n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tab.mu.Lock()
			down := tab.downed[n.name]
			tab.mu.Unlock()
			if down {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(n.srv.Close)
		tab.urls[n.name] = n.srv.URL
		var err error
		if n.dec, err = New(Config{Store: n.store, Cluster: n}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	for p := range ring.PartitionCount {
		tab.set(uint16(p), nodes[p%k].name)
	}
	return tab, nodes
}

// page is a test page: its text names its exact hash, fp its fingerprint.
func page(url, text string, fp uint64) corpus.DedupPage {
	h := sha256.Sum256([]byte(text))
	return corpus.DedupPage{Ref: url + "\t1", Hash: h[:], SimHash: fp}
}
