package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
	"github.com/crawlnode/crawlnode/ring"
)

func post(t *testing.T, h http.Handler, method string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, LinksPath, bytes.NewReader(body)))
	return rec
}

func TestHandler(t *testing.T) {
	b := Batch{From: "n2", Partitions: []PartitionLinks{
		{Partition: 1, Epoch: 4, Links: []Link{{URL: "http://h1.sim.test/a"}}},
		{Partition: 2, Epoch: 4, Links: []Link{{URL: "http://h2.sim.test/b"}}},
		{Partition: 3, Epoch: 4, Links: []Link{{URL: "http://h3.sim.test/c"}}},
	}}
	enc, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied []uint16
	var from string
	mk := func(fail map[uint16]error) http.Handler {
		applied = nil
		return Handler(func(ctx context.Context, f string, p PartitionLinks) error {
			mu.Lock()
			defer mu.Unlock()
			from = f
			if err := fail[p.Partition]; err != nil {
				return err
			}
			applied = append(applied, p.Partition)
			return nil
		})
	}
	cases := []struct {
		name    string
		method  string
		body    []byte
		fail    map[uint16]error
		status  int
		refused []uint16
		applied []uint16
	}{
		{"all committed", http.MethodPost, enc, nil, 200, nil, []uint16{1, 2, 3}},
		{"partial refusal", http.MethodPost, enc, map[uint16]error{2: fmt.Errorf("epoch 3: %w", ErrNotOwner)}, 409, []uint16{2}, []uint16{1, 3}},
		{"all refused", http.MethodPost, enc, map[uint16]error{1: ErrNotOwner, 2: ErrNotOwner, 3: ErrNotOwner}, 409, []uint16{1, 2, 3}, nil},
		{"apply failure", http.MethodPost, enc, map[uint16]error{2: errors.New("disk full")}, 500, nil, []uint16{1}},
		{"get", http.MethodGet, nil, nil, 405, nil, nil},
		{"corrupt", http.MethodPost, []byte{WireVersion, 9, 9, 9}, nil, 400, nil, nil},
		{"too large", http.MethodPost, make([]byte, MaxWireBytes+1), nil, 413, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := post(t, mk(c.fail), c.method, c.body)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			if !slices.Equal(applied, c.applied) {
				t.Fatalf("applied %v, want %v", applied, c.applied)
			}
			if c.status == 409 {
				var rf refusal
				if err := json.Unmarshal(rec.Body.Bytes(), &rf); err != nil || !slices.Equal(rf.Refused, c.refused) || rf.Code != "not_owner" {
					t.Fatalf("refusal body %s (%v), want %v", rec.Body, err, c.refused)
				}
			}
			if c.status == 200 && from != "n2" {
				t.Fatalf("from %q", from)
			}
		})
	}
}

func TestHTTPSender(t *testing.T) {
	var status int
	var respBody string
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != LinksPath || r.Header.Get("Content-Type") != ContentType {
			http.Error(w, "wrong path or type", 404)
			return
		}
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(status)
		io.WriteString(w, respBody)
	}))
	defer srv.Close()
	send := HTTPSender(srv.Client(), func(peer string) (string, bool) {
		if peer == "a" {
			return srv.URL, true
		}
		return "", false
	})
	b := Batch{From: "n", Partitions: []PartitionLinks{{Partition: 4, Epoch: 1, Links: []Link{{URL: "http://h/x"}}},
		{Partition: 9, Epoch: 1, Links: []Link{{URL: "http://h/y"}}}}}
	ctx := context.Background()

	status = 200
	if err := send(ctx, "a", b); err != nil {
		t.Fatal(err)
	}
	if dec, err := Decode(got); err != nil || dec.NumLinks() != 2 {
		t.Fatalf("server got %d links, %v", dec.NumLinks(), err)
	}
	if err := send(ctx, "zz", b); !errors.Is(err, ErrSend) {
		t.Fatalf("unknown peer: %v", err)
	}
	status, respBody = 409, `{"code":"not_owner","refused":[9,200]}`
	err := send(ctx, "a", b)
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, ErrNotOwner) || !slices.Equal(re.Partitions, []uint16{9}) {
		t.Fatalf("409: %v (only partitions of the batch count)", err)
	}
	status, respBody = 409, `{"code":"not_owner","refused":[200]}`
	if err := send(ctx, "a", b); !errors.Is(err, ErrSend) || errors.Is(err, ErrNotOwner) {
		t.Fatalf("409 naming no partition of the batch: %v", err)
	}
	status, respBody = 409, `not json`
	if err := send(ctx, "a", b); !errors.Is(err, ErrSend) || errors.Is(err, ErrNotOwner) {
		t.Fatalf("409 without a list: %v", err)
	}
	status, respBody = 503, "busy"
	if err := send(ctx, "a", b); !errors.Is(err, ErrSend) {
		t.Fatalf("503: %v", err)
	}
	srv.Close()
	if err := send(ctx, "a", b); !errors.Is(err, ErrSend) {
		t.Fatalf("closed server: %v", err)
	}
}

// TestPartialRefusalHTTP runs the outbox against a real receiver over loopback HTTP: the
// receiver refuses some partitions (it does not own them at epoch 1); the others are
// committed and deleted, the refused ones stay queued and held until the table gives them
// a new epoch, then they are delivered.
func TestPartialRefusalHTTP(t *testing.T) {
	clock := newFakeClock()
	tab := &table{}
	for p := range uint16(ring.PartitionCount) {
		tab.set(p, "a", 1)
	}
	var mu sync.Mutex
	got := map[string]int{}
	refusedPosts := 0
	ownedAt := func(p uint16, epoch uint64) bool { return p%5 != 0 || epoch >= 2 }
	srv := httptest.NewServer(Handler(func(ctx context.Context, from string, pl PartitionLinks) error {
		mu.Lock()
		defer mu.Unlock()
		if !ownedAt(pl.Partition, pl.Epoch) {
			refusedPosts++
			return fmt.Errorf("partition %d at epoch %d: %w", pl.Partition, pl.Epoch, ErrNotOwner)
		}
		for _, l := range pl.Links {
			got[l.URL]++
		}
		return nil
	}))
	defer srv.Close()
	send := HTTPSender(srv.Client(), func(string) (string, bool) { return srv.URL, true })
	o := newOutbox(t, Config{DB: memDB(t), OwnerOf: tab.OwnerOf, Send: send, Now: clock.Now, BatchLinks: 200})
	links := simLinks(3000, 150, 17)
	var heldParts []uint16
	held := 0
	for _, l := range links {
		if p, _ := PartitionOfURL(l.URL); p%5 == 0 {
			held++
			if !slices.Contains(heldParts, p) {
				heldParts = append(heldParts, p)
			}
		}
	}
	if held == 0 {
		t.Fatal("no link in a refused partition")
	}
	if err := o.Add(links); err != nil {
		t.Fatal(err)
	}
	start(t, o)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	clustertest.Eventually(t, 10*time.Second, "owned partitions delivered", func() bool {
		return count() == len(links)-held && o.Queued() == held
	})
	st := o.Stats()
	if st.Refused == 0 || len(st.QueuedByPartition) != len(heldParts) {
		t.Fatalf("refused %d, queued partitions %v, want %v", st.Refused, st.QueuedByPartition, heldParts)
	}
	for _, p := range heldParts {
		if st.QueuedByPartition[p] == 0 {
			t.Fatalf("refused partition %d not queued", p)
		}
	}
	// Held: with the same owner and epoch, and the fake clock still, no new attempt.
	mu.Lock()
	before := refusedPosts
	mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	after := refusedPosts
	mu.Unlock()
	if after != before {
		t.Fatalf("held partitions sent again %d times before their hold ended", after-before)
	}
	// The lease moves (new epoch): the sender re-resolves and the receiver commits.
	for _, p := range heldParts {
		tab.set(p, "a", 2)
	}
	clustertest.Eventually(t, 10*time.Second, "refused partitions delivered", func() bool { return o.Queued() == 0 && count() == len(links) })
	mu.Lock()
	defer mu.Unlock()
	for u, n := range got {
		if n != 1 {
			t.Fatalf("%s committed %d times", u, n)
		}
	}
	if st := o.Stats(); st.BytesPerLink <= 0 || st.BytesPerLink > 30 {
		t.Fatalf("bytes per link %.1f", st.BytesPerLink)
	}
}

// TestHandlerSync: sync runs after the applies, with the committed partitions only, and
// before the answer; its failure keeps the batch at the sender (500).
func TestHandlerSync(t *testing.T) {
	b := Batch{From: "n2", Partitions: []PartitionLinks{
		{Partition: 1, Epoch: 4, Links: []Link{{URL: "http://h1.sim.test/a"}}},
		{Partition: 2, Epoch: 4, Links: []Link{{URL: "http://h2.sim.test/b"}}},
	}}
	enc, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	apply := func(ctx context.Context, f string, p PartitionLinks) error {
		events = append(events, fmt.Sprint("apply ", p.Partition))
		if p.Partition == 2 {
			return ErrNotOwner
		}
		return nil
	}
	var syncErr error
	h := HandlerSync(apply, func(ctx context.Context, committed []uint16) error {
		events = append(events, fmt.Sprint("sync ", committed))
		return syncErr
	})
	if rec := post(t, h, http.MethodPost, enc); rec.Code != 409 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if want := []string{"apply 1", "apply 2", "sync [1]"}; !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	events, syncErr = nil, errors.New("replicas behind")
	if rec := post(t, h, http.MethodPost, enc); rec.Code != 500 || !strings.Contains(rec.Body.String(), "sync_failed") {
		t.Fatalf("sync failure: status %d: %s", rec.Code, rec.Body)
	}
}
