package corpus

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
	"golang.org/x/text/unicode/norm"
)

func TestNormalizeText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"  Hello,   World!  ", "hello world"},
		{"Hello\n\nworld\t—  again...", "hello world again"},
		{"ÉCOLE Straße", "école straße"},
		{"cafe\u0301", "café"}, // decomposed é becomes NFC
		{"a-b_c", "a b c"},
		{"Ünïcödé 123", "ünïcödé 123"},
		{"!!!", ""},
	}
	for _, c := range cases {
		if got := NormalizeText(c.in); got != c.want {
			t.Errorf("NormalizeText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if ContentHash("Hello, world.") != ContentHash("hello   WORLD") {
		t.Error("content hash differs for texts that differ only in case and punctuation")
	}
	if ContentHash("hello world") == ContentHash("hello word") {
		t.Error("content hash equal for different texts")
	}
	if len(ContentHash("x")) != 64 {
		t.Error("content hash is not hex sha256")
	}
}

func words400(seed uint64) []string {
	return strings.Fields(strings.Join(genParagraphs(seed, 5, 80), " "))
}

func TestHamming(t *testing.T) {
	cases := []struct {
		a, b uint64
		want int
	}{
		{0, 0, 0}, {0, 1, 1}, {0xff, 0, 8}, {^uint64(0), 0, 64}, {0xf0f0, 0x0ff0, 8},
	}
	for _, c := range cases {
		if got := Hamming(c.a, c.b); got != c.want {
			t.Errorf("Hamming(%x,%x) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestSimHash(t *testing.T) {
	base := strings.Join(words400(1), " ")
	w := words400(1)
	w[200] = "zebra"
	oneWord := strings.Join(w, " ")
	typo := strings.Replace(base, " the ", " teh ", 1)
	cases := []struct {
		name    string
		a, b    string
		minDist int
		maxDist int
	}{
		{"identical", base, base, 0, 0},
		{"case and punctuation", base, strings.ToUpper(strings.ReplaceAll(base, ".", "!")), 0, 0},
		{"layout", base, strings.ReplaceAll(base, " ", "\n  "), 0, 0},
		{"one word replaced", base, oneWord, 0, NearMaxDistance},
		{"typo", base, typo, 0, NearMaxDistance},
		{"unrelated", base, strings.Join(words400(2), " "), 11, 64},
		{"unrelated short", "the quick brown fox", "lorem ipsum dolor sit amet", 11, 64},
	}
	for _, c := range cases {
		d := Hamming(SimHash(c.a), SimHash(c.b))
		if d < c.minDist || d > c.maxDist {
			t.Errorf("%s: distance %d, want [%d,%d]", c.name, d, c.minDist, c.maxDist)
		}
	}
	if SimHash("") != 0 {
		t.Error("SimHash of empty text is not 0")
	}
	if SimHash("two words") == 0 || SimHash("two words") == SimHash("other words") {
		t.Error("short texts hash to 0 or collide")
	}
}

// TestSimHashEditDistribution measures what a one-word edit of a 400-word text does to the
// fingerprint over many texts: 64-bit SimHash of 3-word shingles is probabilistic, a single
// edit changes 6 of ~400 features.
func TestSimHashEditDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const trials = 400
	hist := make([]int, 65)
	unrelatedMin := 64
	for i := 0; i < trials; i++ {
		w := words400(uint64(100 + i))
		a := strings.Join(w, " ")
		w[r.IntN(len(w))] = "zebra"
		hist[Hamming(SimHash(a), SimHash(strings.Join(w, " ")))]++
		unrelatedMin = min(unrelatedMin, Hamming(SimHash(a), SimHash(strings.Join(words400(uint64(9000+i)), " "))))
	}
	within := 0
	for d := 0; d <= NearMaxDistance; d++ {
		within += hist[d]
	}
	share := float64(within) / trials
	t.Logf("one-word edit of 400 words: %.1f%% within distance %d; histogram %v; closest unrelated pair %d",
		100*share, NearMaxDistance, hist[:10], unrelatedMin)
	if share < 0.7 {
		t.Errorf("only %.1f%% of one-word edits within distance %d", 100*share, NearMaxDistance)
	}
	if unrelatedMin <= 10 {
		t.Errorf("an unrelated pair at distance %d", unrelatedMin)
	}
}

func flipBits(r *rand.Rand, h uint64, n int) uint64 {
	for _, b := range r.Perm(64)[:n] {
		h ^= 1 << uint(b)
	}
	return h
}

func testNearIndexProperty(t *testing.T, idx NearIndex, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 77))
	var stored []uint64
	const n = 3000
	for i := 0; i < n; i++ {
		var h uint64
		if i > 0 && r.IntN(3) == 0 {
			// Near an existing one, so that buckets and distances 0..6 all occur.
			h = flipBits(r, stored[r.IntN(len(stored))], r.IntN(7))
		} else {
			h = r.Uint64()
		}
		if err := idx.Insert(h, fmt.Sprintf("ref-%d", i)); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, h)
	}
	for q := 0; q < 3000; q++ {
		var h uint64
		switch q % 3 {
		case 0:
			h = flipBits(r, stored[r.IntN(n)], r.IntN(4)) // within 3
		case 1:
			h = flipBits(r, stored[r.IntN(n)], 4+r.IntN(3)) // just outside, unless near another
		default:
			h = r.Uint64()
		}
		best := 65
		for _, s := range stored {
			best = min(best, bits.OnesCount64(h^s))
		}
		m, found, probes, err := idx.Lookup(h)
		if err != nil {
			t.Fatal(err)
		}
		if probes > NearTables || probes < 1 {
			t.Fatalf("%d probes", probes)
		}
		if found != (best <= NearMaxDistance) {
			t.Fatalf("query %016x: found=%v, brute force min distance %d", h, found, best)
		}
		if found && (m.Distance != best || Hamming(h, m.Fingerprint) != best || !strings.HasPrefix(m.Ref, "ref-")) {
			t.Fatalf("query %016x: match %+v, brute force min distance %d", h, m, best)
		}
	}
}

func TestMemNearIndexProperty(t *testing.T) {
	testNearIndexProperty(t, NewMemNearIndex(), 1)
}

func TestBadgerNearIndexProperty(t *testing.T) {
	db := openMemDB(t)
	testNearIndexProperty(t, NewBadgerNearIndex(db), 2)
}

func TestNearIndexRefReplaced(t *testing.T) {
	for name, idx := range map[string]NearIndex{"mem": NewMemNearIndex(), "badger": NewBadgerNearIndex(openMemDB(t))} {
		idx.Insert(42, "a")
		idx.Insert(42, "b")
		m, ok, _, _ := idx.Lookup(43)
		if !ok || m.Ref != "b" || m.Distance != 1 {
			t.Errorf("%s: %+v %v", name, m, ok)
		}
	}
}

func openMemDB(t testing.TB) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// simHashReference is the fingerprint written plainly: split the text into sentences at the
// end marks (and long runs at content-defined words), normalize each sentence's words, hash
// (word, offset, sentence length, previous sentence length), keep the minimum of each of the 64
// bins, densify, set a bit when its mixed minimum falls in the lowest 30% of the range.
func simHashReference(text string) uint64 {
	text = norm.NFC.String(text)
	var sentences [][]string
	for _, s := range strings.FieldsFunc(text, sentenceEnd) {
		var cur []string
		for _, w := range strings.Fields(NormalizeText(s)) {
			cur = append(cur, w)
			if len(cur) >= hardSentenceWords || len(cur) >= maxSentenceWords && xxhash.Sum64String(w)%cutEvery == 0 {
				sentences = append(sentences, cur)
				cur = nil
			}
		}
		if len(cur) > 0 {
			sentences = append(sentences, cur)
		}
	}
	if len(sentences) == 0 {
		return 0
	}
	var mins [64]uint64
	found := [64]bool{}
	prev := 0
	for _, s := range sentences {
		for i, w := range s {
			f := mix64(xxhash.Sum64String(w) ^ mix64(uint64(prev)<<40|uint64(len(s))<<20|uint64(i)))
			b := f >> 58
			if v := f << 6; !found[b] || v < mins[b] {
				mins[b], found[b] = v, true
			}
		}
		prev = len(s)
	}
	var h uint64
	for j := 0; j < 64; j++ {
		m := mins[j]
		for k := 1; !found[j] && k < 64; k++ {
			if found[(j+k)%64] {
				m = mins[(j+k)%64] ^ uint64(k)*0x9e3779b97f4a7c15
				break
			}
		}
		if float64(mix64(m^uint64(j)*0xc4ceb9fe1a85ec53)) < 0.3*(1<<64) {
			h |= 1 << uint(j)
		}
	}
	return h
}

func TestSimHashMatchesReference(t *testing.T) {
	texts := []string{"", "one", "two words", "three words here", strings.Join(words400(3), " "),
		strings.Join(genParagraphs(4, 30, 90), "\n"),                  // many sentences
		strings.Repeat("no end mark in this long list of words ", 60), // content-defined cuts
		"Ünïcödé ÉCOLE… straße。 cafe\u0301? ok!"}
	for _, tx := range texts {
		if got, want := SimHash(tx), simHashReference(tx); got != want {
			t.Errorf("%.30q: %016x, reference %016x", tx, got, want)
		}
	}
}
