package frontier

import (
	"errors"
	"testing"
	"time"
)

func TestDecideImport(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t2 := t1.Add(time.Millisecond)
	queued := func(at time.Time) SeenRecord { return SeenRecord{State: StateQueued, At: at} }
	final := func(st SeenState, at time.Time) SeenRecord { return SeenRecord{State: st, At: at} }
	cases := []struct {
		name  string
		rec   impRec
		local localFacts
		want  verdict
	}{
		{"queued URL new here", impRec{fam: famQueue}, localFacts{}, queueAdd},
		{"retry new here", impRec{fam: famRetry}, localFacts{}, queueAdd},
		{"queued URL queued here too", impRec{fam: famQueue}, localFacts{seen: queued(t1), seenOK: true}, queueKept},
		{"queued URL fetched here", impRec{fam: famQueue}, localFacts{seen: final(StateFetched, t1), seenOK: true}, queueKept},
		{"retry of a URL dead here", impRec{fam: famRetry}, localFacts{seen: final(StateDead, t1), seenOK: true}, queueKept},

		{"queued record without its URL here", impRec{fam: famSeen, seen: queued(t1)}, localFacts{}, seenOrphan},
		{"fetched record new here", impRec{fam: famSeen, seen: final(StateFetched, t1)}, localFacts{}, seenNew},
		{"dropped record new here", impRec{fam: famSeen, seen: final(StateDropped, t1)}, localFacts{}, seenNew},
		{"both queued: local stays", impRec{fam: famSeen, seen: queued(t2)}, localFacts{seen: queued(t1), seenOK: true}, seenKept},
		{"queued does not beat final", impRec{fam: famSeen, seen: queued(t2)}, localFacts{seen: final(StateFetched, t1), seenOK: true}, seenKept},
		{"final beats local queued: unqueue", impRec{fam: famSeen, seen: final(StateFetched, t1)}, localFacts{seen: queued(t2), seenOK: true}, seenUnqueue},
		{"dead beats local queued: unqueue", impRec{fam: famSeen, seen: final(StateDead, t1)}, localFacts{seen: queued(t1), seenOK: true}, seenUnqueue},
		{"later final wins", impRec{fam: famSeen, seen: final(StateDead, t2)}, localFacts{seen: final(StateFetched, t1), seenOK: true}, seenUpdate},
		{"earlier final loses", impRec{fam: famSeen, seen: final(StateFetched, t1)}, localFacts{seen: final(StateDead, t2), seenOK: true}, seenKept},
		{"equal finals keep the local", impRec{fam: famSeen, seen: final(StateDropped, t1)}, localFacts{seen: final(StateFetched, t1), seenOK: true}, seenKept},

		{"dead letter new here", impRec{fam: famDead}, localFacts{}, deadNew},
		{"dead letter here already", impRec{fam: famDead}, localFacts{exists: true}, deadKept},

		{"host state", impRec{fam: famHost}, localFacts{}, hostMerge},
		{"host state, exists ignored", impRec{fam: famHost}, localFacts{exists: true}, hostMerge},
		{"host meta new here", impRec{fam: famHost, meta: true}, localFacts{}, metaNew},
		{"host meta here already", impRec{fam: famHost, meta: true}, localFacts{exists: true}, metaKept},

		{"dedup key new here", impRec{fam: famDedup}, localFacts{}, dedupNew},
		{"dedup key here already: first writer wins", impRec{fam: famDedup}, localFacts{exists: true}, dedupKept},
	}
	for _, c := range cases {
		if got := decideImport(&c.rec, c.local); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
	}
}

func TestImportStatsCount(t *testing.T) {
	var st ImportStats
	for _, v := range []verdict{queueKept, queueAdd, seenOrphan, seenNew, seenKept, seenUpdate, seenUnqueue,
		deadKept, deadNew, metaKept, metaNew, hostMerge, dedupKept, dedupNew} {
		st.count(v)
	}
	want := ImportStats{QueueKept: 1, Orphans: 1, SeenNew: 1, SeenKept: 1, SeenUpdated: 2, DeadKept: 1, Dead: 1,
		HostMetaKept: 1, HostMeta: 1, DedupKept: 1, DedupNew: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}

func TestDecodeImport(t *testing.T) {
	const p = 7
	partOf := func(host string) uint16 {
		if host == "other.test" {
			return 8
		}
		return p
	}
	rec := qrec{URL: "http://h.test/a", Depth: 2}
	qk := qKey(p, "h.test", 3, 2, 42)
	hash := URLHash(rec.URL)
	sr := SeenRecord{URL: rec.URL, State: StateFetched, Status: 200, At: time.Unix(100, 0)}
	hr := hostRec{DelaySet: true, Delay: 250 * time.Millisecond, Next: 5, Admitted: 3}
	rk := rKey(p, 1234, 99|revisitBit)
	dl := DeadLetter{URL: rec.URL, Host: "h.test", Attempts: 5}
	cases := []struct {
		name    string
		raw     rawRec
		wantErr error
		check   func(t *testing.T, d impRec)
	}{
		{name: "queue record", raw: rawRec{famQueue, qk, rec.encode()}, check: func(t *testing.T, d impRec) {
			if d.host != "h.test" || d.hash != hash || d.rec.URL != rec.URL || string(d.qk) != string(qk) {
				t.Errorf("decoded %+v", d)
			}
		}},
		{name: "retry record", raw: rawRec{famRetry, rk, encodeR(qk, &rec)}, check: func(t *testing.T, d impRec) {
			if d.host != "h.test" || d.due != 1234 || d.rseq != 99|revisitBit || d.hash != hash || string(d.qk) != string(qk) {
				t.Errorf("decoded %+v", d)
			}
		}},
		{name: "seen record", raw: rawRec{famSeen, hashKey(famSeen, p, hash), sr.encode()}, check: func(t *testing.T, d impRec) {
			if d.hash != hash || d.seen.State != StateFetched || d.seen.Status != 200 {
				t.Errorf("decoded %+v", d)
			}
		}},
		{name: "dead letter", raw: rawRec{famDead, hashKey(famDead, p, hash), dl.encode()}, check: func(t *testing.T, d impRec) {
			if d.hash != hash {
				t.Errorf("decoded %+v", d)
			}
		}},
		{name: "host state", raw: rawRec{famHost, hKey(p, "h.test"), hr.encode()}, check: func(t *testing.T, d impRec) {
			if d.host != "h.test" || d.meta || d.hostRec != hr {
				t.Errorf("decoded %+v", d)
			}
		}},
		{name: "host meta", raw: rawRec{famHost, hMetaKey(p, "h.test"), []byte("robots")}, check: func(t *testing.T, d impRec) {
			if d.host != "h.test" || !d.meta {
				t.Errorf("decoded %+v", d)
			}
		}},
		{name: "family byte differs", raw: rawRec{famSeen, qk, rec.encode()}, wantErr: ErrCorrupt},
		{name: "short key", raw: rawRec{famSeen, []byte{famSeen, 0}, nil}, wantErr: ErrCorrupt},
		{name: "another partition", raw: rawRec{famQueue, qKey(p+1, "h.test", 3, 2, 42), rec.encode()}, wantErr: ErrForeignKey},
		{name: "host of another partition", raw: rawRec{famQueue, qKey(p, "other.test", 3, 2, 42), rec.encode()}, wantErr: ErrForeignKey},
		{name: "retry naming a queue key of another partition", raw: rawRec{famRetry, rk, encodeR(qKey(p+1, "h.test", 3, 2, 42), &rec)}, wantErr: ErrCorrupt},
		{name: "seen key of the wrong length", raw: rawRec{famSeen, hashKey(famSeen, p, hash)[:18], sr.encode()}, wantErr: ErrCorrupt},
		{name: "dead key of the wrong length", raw: rawRec{famDead, append(hashKey(famDead, p, hash), 0), dl.encode()}, wantErr: ErrCorrupt},
		{name: "empty host", raw: rawRec{famHost, hKey(p, ""), hr.encode()}, wantErr: ErrCorrupt},
		{name: "meta of no host", raw: rawRec{famHost, hMetaKey(p, ""), nil}, wantErr: ErrCorrupt},
		{name: "host key with a stray suffix", raw: rawRec{famHost, append(hKey(p, "h.test"), 0, 'x'), nil}, wantErr: ErrCorrupt},
		{name: "meta of a host of another partition", raw: rawRec{famHost, hMetaKey(p, "other.test"), nil}, wantErr: ErrForeignKey},
		{name: "unknown family", raw: rawRec{'z', []byte{'z', 0, p}, nil}, wantErr: ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := decodeImport(c.raw, p, partOf)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, d)
		})
	}
}
