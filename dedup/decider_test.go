package dedup

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/dgraph-io/badger/v4"
)

func decide(t *testing.T, d *Decider, pages ...corpus.DedupPage) []corpus.DedupVerdict {
	t.Helper()
	vs, err := d.Decide(context.Background(), pages)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestDecideRules: the single-node rules, with every key on another node than the asker:
// the first page with a text is the original, later copies point at it, a near copy's
// later exact copy points at the original too, and a page asked again finds itself.
func TestDecideRules(t *testing.T) {
	_, ns := newCluster(t, 3)
	const fp = 0x0123_4567_89ab_cdef
	orig := page("http://a/1", "alpha", fp)
	exact := page("http://b/1", "alpha", fp)
	near := page("http://c/1", "alpha!", fp^0b101) // distance 2
	nearCopy := page("http://d/1", "alpha!", fp^0b101)
	far := page("http://e/1", "other", fp^0xffff_0000_0000_00ff)
	cases := []struct {
		asker *node
		p     corpus.DedupPage
		want  corpus.DedupVerdict
	}{
		{ns[0], orig, corpus.DedupVerdict{}},
		{ns[1], exact, corpus.DedupVerdict{Of: orig.Ref, Kind: corpus.DupExact}},
		{ns[2], near, corpus.DedupVerdict{Of: orig.Ref, Kind: corpus.DupNear, Distance: 2}},
		{ns[0], nearCopy, corpus.DedupVerdict{Of: orig.Ref, Kind: corpus.DupNear, Distance: 2}},
		{ns[1], far, corpus.DedupVerdict{}},
		{ns[2], orig, corpus.DedupVerdict{}}, // redone after a crash: finds itself
		{ns[2], far, corpus.DedupVerdict{}},
	}
	for i, c := range cases {
		if got := decide(t, c.asker.dec, c.p)[0]; got != c.want {
			t.Errorf("case %d (%s): %+v, want %+v", i, c.p.Ref, got, c.want)
		}
	}
	// Only originals entered: 2 originals x (1 exact + 4 near) keys over all nodes.
	if n := countKeys(t, ns); n != 10 {
		t.Errorf("%d duplicate keys stored, want 10 (only originals enter the indexes)", n)
	}
	var remote int64
	for _, n := range ns {
		remote += n.dec.Stats().RemoteOps.Load()
	}
	if remote == 0 {
		t.Error("no operation went to another node")
	}
}

func countKeys(t *testing.T, ns []*node) int {
	t.Helper()
	total := 0
	for _, n := range ns {
		total += countDB(t, n)
	}
	return total
}

// TestDecideBatchInOrder: copies inside one batch are decided in order, like pages one by one.
func TestDecideBatchInOrder(t *testing.T) {
	_, ns := newCluster(t, 2)
	a := page("http://a/1", "x", 1<<40)
	b := page("http://b/1", "x", 1<<40)
	c := page("http://c/1", "y", 1<<40|1)
	vs := decide(t, ns[0].dec, a, b, c)
	want := []corpus.DedupVerdict{{}, {Of: a.Ref, Kind: corpus.DupExact}, {Of: a.Ref, Kind: corpus.DupNear, Distance: 1}}
	for i := range want {
		if vs[i] != want[i] {
			t.Errorf("page %d: %+v, want %+v", i, vs[i], want[i])
		}
	}
}

// TestRacingCopies: groups of exact and near copies (distance <= 3 from a group's base,
// flips in different blocks so they share only some blocks) decided at once from three
// nodes: every group gets exactly one original, and every copy is marked.
func TestRacingCopies(t *testing.T) {
	_, ns := newCluster(t, 3)
	r := rand.New(rand.NewPCG(7, 7))
	const groups, copies = 40, 6
	type member struct {
		g int
		p corpus.DedupPage
	}
	var all []member
	for g := 0; g < groups; g++ {
		base := r.Uint64()
		for c := 0; c < copies; c++ {
			fp, text := base, fmt.Sprintf("group %d", g)
			if c%2 == 1 { // a near copy: one flipped bit in each of up to 3 blocks (distance <= 3 to base)
				for b := 0; b < 1+c%3; b++ {
					fp ^= 1 << (16*uint((c+b)%4) + uint(r.IntN(16)))
				}
				text += fmt.Sprintf(" near %d", c)
			}
			all = append(all, member{g, page(fmt.Sprintf("http://h%d/g%d/%d", c, g, c), text, fp)})
		}
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	verdicts := make([]corpus.DedupVerdict, len(all))
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(all); i += 6 {
				vs, err := ns[w%3].dec.Decide(context.Background(), []corpus.DedupPage{all[i].p})
				if err != nil {
					t.Error(err)
					return
				}
				verdicts[i] = vs[0]
			}
		}()
	}
	wg.Wait()
	originals := map[int]int{}
	for i, m := range all {
		if verdicts[i].Of == "" {
			originals[m.g]++
		}
	}
	// Near copies of one base may be up to 6 apart, so a group may hold two originals
	// (as on one node); an exact copy never is one, and no group is left without one.
	for g := 0; g < groups; g++ {
		if originals[g] == 0 {
			t.Errorf("group %d has no original", g)
		}
	}
	// What one node guarantees holds across nodes: no two originals have the same text
	// or fingerprints within MaxDistance (the later would have found the earlier).
	var origs []corpus.DedupPage
	for i, m := range all {
		if verdicts[i].Of == m.p.Ref {
			t.Errorf("%s marked a duplicate of itself", m.p.Ref)
		}
		if verdicts[i].Of == "" {
			origs = append(origs, m.p)
		}
	}
	for i := range origs {
		for j := i + 1; j < len(origs); j++ {
			if string(origs[i].Hash) == string(origs[j].Hash) || hamming(origs[i].SimHash, origs[j].SimHash) <= MaxDistance {
				t.Errorf("two originals are copies: %s and %s (distance %d)", origs[i].Ref, origs[j].Ref, hamming(origs[i].SimHash, origs[j].SimHash))
			}
		}
	}
	if len(origs) == len(all) {
		t.Fatal("nothing was marked a duplicate")
	}
}

// TestRacingExactCopies: the same text asked from three nodes at once, many times: one
// original each time.
func TestRacingExactCopies(t *testing.T) {
	_, ns := newCluster(t, 3)
	for round := 0; round < 30; round++ {
		var wg sync.WaitGroup
		vs := make([]corpus.DedupVerdict, 6)
		for i := range vs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := page(fmt.Sprintf("http://h%d/%d", i, round), fmt.Sprintf("text %d", round), uint64(round)*0x9e3779b97f4a7c15)
				v, err := ns[i%3].dec.Decide(context.Background(), []corpus.DedupPage{p})
				if err != nil {
					t.Error(err)
					return
				}
				vs[i] = v[0]
			}()
		}
		wg.Wait()
		orig := 0
		for _, v := range vs {
			if v.Of == "" {
				orig++
			} else if v.Kind != corpus.DupExact {
				t.Errorf("round %d: an exact copy marked %q", round, v.Kind)
			}
		}
		if orig != 1 {
			t.Errorf("round %d: %d originals, want 1", round, orig)
		}
	}
}

// TestOwnerUnreachable: a round with an owner down fails (nothing decided), and the same
// pages asked again once it is back get the decisions they would have got.
func TestOwnerUnreachable(t *testing.T) {
	tab, ns := newCluster(t, 2)
	a := page("http://a/1", "t", 42)
	b := page("http://b/1", "t", 42)
	decide(t, ns[0].dec, a)
	tab.mu.Lock()
	tab.downed["n1"] = true
	tab.mu.Unlock()
	if _, err := ns[0].dec.Decide(context.Background(), []corpus.DedupPage{b}); !errors.Is(err, ErrSend) {
		t.Fatalf("owner down: err %v, want ErrSend", err)
	}
	tab.mu.Lock()
	tab.downed["n1"] = false
	tab.mu.Unlock()
	if v := decide(t, ns[0].dec, b)[0]; v.Of != a.Ref || v.Kind != corpus.DupExact {
		t.Errorf("after the owner came back: %+v", v)
	}
}

// TestRefusedEpoch: an owner refuses a request made at another epoch (409), applies
// nothing, and the sender's next round, at the new epoch, goes through.
func TestRefusedEpoch(t *testing.T) {
	tab, ns := newCluster(t, 2)
	a := page("http://a/1", "t", 42)
	p := ExactPartition(a.Hash)
	owner, epoch := ns[0].OwnerOf(p)
	// The owner's table moves on; the sender still sends the old epoch.
	req := &Request{From: "n0", Parts: []PartEpoch{{p, epoch + 1}}, Ops: []Op{{Code: OpExact, Part: p, Hash: a.Hash, Ref: a.Ref}}}
	_, _, _, err := post(context.Background(), ns[0].Do, tab.urls[owner], owner, req)
	if !errors.Is(err, ErrNotOwner) {
		t.Fatalf("wrong epoch: %v, want ErrNotOwner", err)
	}
	if n := countKeys(t, ns); n != 0 {
		t.Fatalf("%d keys written by a refused request", n)
	}
	// A handoff holds the partition: refused too.
	tab.mu.Lock()
	tab.held[p] = true
	tab.mu.Unlock()
	if _, err := ns[0].dec.Decide(context.Background(), []corpus.DedupPage{a}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("held partition: %v, want ErrNotOwner", err)
	}
	tab.mu.Lock()
	tab.held[p] = false
	tab.mu.Unlock()
	decide(t, ns[0].dec, a)
}

// TestRetriedRoundKeepsOneOriginal: a round that failed at one owner after another applied
// its share is asked again; a near pair in it still gets one original (a page does not
// enter a bucket where it found its pair, so the retry cannot find the pair both ways).
func TestRetriedRoundKeepsOneOriginal(t *testing.T) {
	tab, ns := newCluster(t, 2)
	r := rand.New(rand.NewPCG(3, 3))
	for try := 0; try < 20; try++ {
		fp := r.Uint64()
		a := page(fmt.Sprintf("http://a/%d", try), fmt.Sprintf("a%d", try), fp)
		b := page(fmt.Sprintf("http://b/%d", try), fmt.Sprintf("b%d", try), fp^1) // differs in block 0: table 1 decides
		judge, _ := ns[0].OwnerOf(NearPartition(1, block(fp, 1)))
		down := "n0"
		if judge == "n0" {
			down = "n1"
		}
		tab.mu.Lock()
		tab.downed[down] = true
		tab.mu.Unlock()
		asker := ns[0]
		if down == "n0" {
			asker = ns[1] // the asker's own share is applied in process
		}
		_, err := asker.dec.Decide(context.Background(), []corpus.DedupPage{a, b})
		tab.mu.Lock()
		tab.downed[down] = false
		tab.mu.Unlock()
		if err == nil {
			continue // the down node owned none of the keys
		}
		vs := decide(t, asker.dec, a, b)
		if (vs[0].Of == "") == (vs[1].Of == "") {
			t.Fatalf("try %d: verdicts %+v: want exactly one original", try, vs)
		}
	}
}

// TestRefetchTakesOverItsLostCapture: a page refetched because its capture was lost with
// a node (DedupPage.Refetch) finds keys naming its own URL at another fetch time: it
// becomes the original and takes them over, exact and near (also when its text changed a
// little), so later copies point at it; without Refetch the same page is a duplicate of
// its earlier capture, as a recrawl's is; another URL's original is never taken over.
func TestRefetchTakesOverItsLostCapture(t *testing.T) {
	_, ns := newCluster(t, 3)
	const fp = 0x0123_4567_89ab_cdef
	lost := page("http://a/1", "alpha", fp)
	other := page("http://o/1", "omega", 0xfedc_ba98_7654_3210)
	if v := decide(t, ns[0].dec, lost, other); v[0] != (corpus.DedupVerdict{}) || v[1] != (corpus.DedupVerdict{}) {
		t.Fatalf("first captures: %+v", v)
	}
	again := page("http://a/1", "alpha", fp)
	again.Ref = "http://a/1\t2"
	if v := decide(t, ns[1].dec, again)[0]; v.Of != lost.Ref {
		t.Fatalf("a plain second capture: %+v, want a duplicate of the first", v)
	}
	again.Refetch = true
	if v := decide(t, ns[1].dec, again)[0]; v != (corpus.DedupVerdict{}) {
		t.Fatalf("the refetch: %+v, want an original", v)
	}
	copyOf := page("http://b/1", "alpha", fp)
	if v := decide(t, ns[2].dec, copyOf)[0]; v.Of != again.Ref || v.Kind != corpus.DupExact {
		t.Errorf("a later copy: %+v, want an exact duplicate of the refetch %q", v, again.Ref)
	}
	near := page("http://c/1", "alpha?", fp^0b11)
	if v := decide(t, ns[0].dec, near)[0]; v.Of != again.Ref || v.Kind != corpus.DupNear {
		t.Errorf("a later near copy: %+v, want a near duplicate of the refetch %q", v, again.Ref)
	}
	// The refetch of another URL whose text is another's original stays its duplicate.
	mirror := page("http://m/1", "omega", 0xfedc_ba98_7654_3210)
	mirror.Ref, mirror.Refetch = "http://m/1\t3", true
	if v := decide(t, ns[2].dec, mirror)[0]; v.Of != other.Ref {
		t.Errorf("a refetched mirror: %+v, want a duplicate of %q", v, other.Ref)
	}
	// A refetch whose text changed a little replaces its capture's near entries.
	n1 := page("http://n/1", "nu", 0x1111_2222_3333_4444)
	decide(t, ns[0].dec, n1)
	n2 := page("http://n/1", "nu!", 0x1111_2222_3333_4444^0b1)
	n2.Ref, n2.Refetch = "http://n/1\t5", true
	if v := decide(t, ns[1].dec, n2)[0]; v != (corpus.DedupVerdict{}) {
		t.Errorf("a changed refetch: %+v, want an original", v)
	}
	n3 := page("http://p/1", "nu?", 0x1111_2222_3333_4444^0b10)
	if v := decide(t, ns[2].dec, n3)[0]; v.Of != n2.Ref {
		t.Errorf("a near copy after the changed refetch: %+v, want a duplicate of %q", v, n2.Ref)
	}
}

// TestExactCopyKeepsOriginalsNearEntry drives two exact copies x and y through both rounds
// in the order that left the original without a near entry (TestRacingCopies, about 1 run
// in 15): x enters the near buckets first, y finds x's entries there (an exact copy:
// ignored) and enters none, and the exact key makes one of them the original. The
// duplicate takes back what it holds; a near copy n decided afterwards must find the
// original, and the original asked again must find itself.
func TestExactCopyKeepsOriginalsNearEntry(t *testing.T) {
	for _, yFirst := range []bool{true, false} {
		st := NewStore(memDB(t))
		apply := func(o ...Op) []Result {
			t.Helper()
			res, err := st.Apply(o)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		ops := func(p corpus.DedupPage) (exact Op, near []Op) {
			exact = Op{Code: OpExact, Part: ExactPartition(p.Hash), Hash: p.Hash, Ref: p.Ref}
			for tb := 0; tb < Tables; tb++ {
				near = append(near, Op{Code: OpNear, Part: NearPartition(tb, block(p.SimHash, tb)), Hash: p.Hash[:8], Table: uint8(tb), FP: p.SimHash, Ref: p.Ref})
			}
			return exact, near
		}
		// undo is a page's round 2: what its first round left holding it.
		undo := func(near []Op, res []Result) {
			t.Helper()
			var drop []Op
			for i, r := range res {
				if r.Mine {
					o := near[i]
					o.Code = OpDropNear
					drop = append(drop, o)
				}
			}
			if len(drop) == 0 {
				t.Fatal("the duplicate held no near entry")
			}
			apply(drop...)
		}
		const fp = 0x1234_5678_9abc_def0
		x := page("http://x/1", "text", fp)
		y := page("http://y/1", "text", fp)
		n := page("http://n/1", "text, near", fp^1<<20^1<<40^1<<60) // shares block 0 only: table 0 judges
		xExact, xNear := ops(x)
		yExact, yNear := ops(y)
		orig, dup, dupExact := y, x, xExact
		if !yFirst {
			orig, dup, dupExact = x, y, yExact
			apply(xExact)
		} else {
			apply(yExact)
		}
		xRes := apply(xNear...)
		yRes := apply(yNear...)
		for i := range yRes {
			if yRes[i].Ref != "" || xRes[i].Ref != "" {
				t.Fatalf("table %d: x %+v, y %+v: an exact copy found as a near one", i, xRes[i], yRes[i])
			}
		}
		if r := apply(dupExact); r[0].Ref != orig.Ref {
			t.Fatalf("the copy's exact key: %+v, want %q", r[0], orig.Ref)
		}
		if dup.Ref == x.Ref {
			undo(xNear, xRes)
		} else {
			undo(yNear, yRes)
		}
		nExact, nNear := ops(n)
		if v := verdict(apply(append([]Op{nExact}, nNear...)...)); v.Of != orig.Ref || v.Kind != corpus.DupNear {
			t.Errorf("yFirst %v: near copy of the original: %+v, want a near duplicate of %q", yFirst, v, orig.Ref)
		}
		_, origNear := ops(orig)
		for i, r := range apply(origNear...) {
			if !r.Mine || r.Ref != "" {
				t.Errorf("yFirst %v: the original asked again, table %d: %+v, want its own entry", yFirst, i, r)
			}
		}
	}
}

// TestNearRefWithNewlineRefused: "\n" separates a near entry's holders, so a near
// operation whose ref holds one is refused whole, and nothing is written.
func TestNearRefWithNewlineRefused(t *testing.T) {
	st := NewStore(memDB(t))
	p := page("http://a/1\nb", "t", 42)
	ops := []Op{
		{Code: OpExact, Part: ExactPartition(p.Hash), Hash: p.Hash, Ref: "http://a/1\t1"},
		{Code: OpNear, Part: NearPartition(0, block(42, 0)), Hash: p.Hash[:8], FP: 42, Ref: p.Ref},
	}
	if _, err := st.Apply(ops); !errors.Is(err, ErrBadOp) {
		t.Fatalf("newline in a near ref: %v, want ErrBadOp", err)
	}
	if n := countDB(t, &node{db: st.db}); n != 0 {
		t.Errorf("%d keys written by a refused Apply", n)
	}
}

// TestSharedEntryLostCapture: a refetch (not a revisit) removes only its URL's lost
// capture from a near entry that an exact copy still holds, and joins it; the copy then
// taking the entry back leaves the refetch holding it.
func TestSharedEntryLostCapture(t *testing.T) {
	st := NewStore(memDB(t))
	const fp = 0x0fed_cba9_8765_4321
	lost := page("http://a/1", "text", fp)
	cp := page("http://b/1", "text", fp)
	re := page("http://a/1", "text", fp)
	re.Ref = "http://a/1\t2"
	near := func(p corpus.DedupPage, code byte, revisit bool) Op {
		return Op{Code: code, Part: NearPartition(0, block(fp, 0)), Hash: p.Hash[:8], FP: fp, Ref: p.Ref, Revisit: revisit}
	}
	entry := func() string {
		t.Helper()
		var val []byte
		err := st.db.View(func(txn *badger.Txn) error {
			v, _, err := get(txn, nearKey(NearPartition(0, block(fp, 0)), 0, fp))
			val = v
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if val == nil {
			return "<none>"
		}
		return strings.Join(holders(val), " | ")
	}
	for _, p := range []corpus.DedupPage{lost, cp} {
		if r, err := st.Apply([]Op{near(p, OpNear, false)}); err != nil || !r[0].Mine || r[0].Ref != "" {
			t.Fatalf("%s: %+v %v", p.Ref, r, err)
		}
	}
	if got, want := entry(), lost.Ref+" | "+cp.Ref; got != want {
		t.Fatalf("entry %q, want %q", got, want)
	}
	if r, err := st.Apply([]Op{near(re, OpNear, false)}); err != nil || !r[0].Mine || r[0].Ref != "" {
		t.Fatalf("the refetch: %+v %v", r, err)
	}
	if got, want := entry(), cp.Ref+" | "+re.Ref; got != want {
		t.Fatalf("after the refetch: entry %q, want %q", got, want)
	}
	if _, err := st.Apply([]Op{near(cp, OpDropNear, false)}); err != nil {
		t.Fatal(err)
	}
	if got, want := entry(), re.Ref; got != want {
		t.Fatalf("after the copy took it back: entry %q, want %q", got, want)
	}
	if _, err := st.Apply([]Op{near(re, OpDropNear, false)}); err != nil {
		t.Fatal(err)
	}
	if got := entry(); got != "<none>" {
		t.Fatalf("after its last holder left: entry %q", got)
	}
}
