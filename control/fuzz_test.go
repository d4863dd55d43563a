package control

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fuzzSeeds are real commands in their wire form, one per type.
func fuzzSeeds(tb testing.TB) [][]byte {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var out [][]byte
	for _, c := range []Command{
		RegisterMember{Name: "n1", Info: MemberInfo{RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001", Voter: true, JoinedAt: at}},
		RegisterMember{Name: "n2", Info: MemberInfo{RaftAddr: "127.0.0.1:7002"}},
		SetConfig{Config: JobConfig{UserAgent: "ua", MaxDepth: 3, Scope: ScopeSeedDomains, Include: []string{"*/a/*"},
			BlockedDomains: []string{"Example.COM"}, Recrawl: "on", RecrawlMin: time.Hour, RecrawlMax: 2 * time.Hour,
			RevisitShare: 0.5, Priority: "opic", MaxPages: 100}, At: at},
		BlockDomain{Domain: "bad.test", At: at},
		UnblockDomain{Domain: "bad.test", At: at},
		Pause{At: at},
		Resume{At: at},
		AssignLeases{Moves: []LeaseMove{{Partition: 0, To: "n1"}, {Partition: 270, To: "n2"}}, At: at},
		ForceLease{Moves: []ForcedMove{{Partition: 0, From: "n1", To: "n2"}}, At: at},
		GrantPages{Node: "n1", Ask: 10},
		ReturnPages{Node: "n1", Spent: 3},
		RemoveMember{Name: "n2"},
	} {
		b, err := Encode(c)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// stateJSON is the state as a snapshot would persist it, Index left out.
func stateJSON(t *testing.T, s State) []byte {
	t.Helper()
	s.Index = 0
	var b bytes.Buffer
	if err := WriteSnapshot(&b, &s); err != nil {
		t.Fatalf("state cannot be snapshotted: %v", err)
	}
	return b.Bytes()
}

// FuzzDecodeCommand decodes one Raft log entry: an error wrapping ErrInvalidCommand, or a
// command whose encoding decodes to the same command.
//
//	go test -run '^$' -fuzz '^FuzzDecodeCommand$' -fuzztime 60s -parallel 1 ./control
func FuzzDecodeCommand(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte{99, '{', '}'})
	f.Add([]byte{byte(TypeSetConfig), '[', ']'})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidCommand) || cmd != nil {
				t.Fatalf("bad error %v (command %v)", err, cmd)
			}
			return
		}
		if cmd.Type() != CommandType(data[0]) {
			t.Fatalf("type byte %d decoded as %T", data[0], cmd)
		}
		enc, err := Encode(cmd)
		if err != nil {
			t.Fatalf("decoded command cannot be encoded: %v", err)
		}
		back, err := Decode(enc)
		if err != nil {
			t.Fatalf("own encoding refused: %v", err)
		}
		enc2, _ := Encode(back)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the command:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzFSMApply applies a log of arbitrary entries (NUL-separated; the wire form never holds
// a NUL byte outside the type byte, which is never 0) to two FSMs. The FSM answers every
// entry with a Result and never panics; a refused entry changes nothing but the index;
// lease epochs only grow and an owner change always bumps the epoch; no member spends more
// than it was granted; the state can always be snapshotted and restored exactly; and two
// replicas applying the same log agree.
//
//	go test -run '^$' -fuzz '^FuzzFSMApply$' -fuzztime 60s -parallel 1 ./control
func FuzzFSMApply(f *testing.F) {
	seeds := fuzzSeeds(f)
	f.Add(bytes.Join(seeds, []byte{0}))
	f.Add(bytes.Join(seeds[:3], []byte{0}))
	f.Add(bytes.Join([][]byte{seeds[0], seeds[7], seeds[7], seeds[8], seeds[9], seeds[10]}, []byte{0}))
	f.Fuzz(func(t *testing.T, log []byte) {
		if len(log) > 8<<10 {
			t.Skip() // Raft entries are small; huge inputs only slow the search
		}
		entries := bytes.Split(log, []byte{0})
		if len(entries) > 32 {
			entries = entries[:32]
		}
		a, b := NewFSM(), NewFSM()
		for i, e := range entries {
			idx := uint64(i + 1)
			before := a.State()
			ra, ok := a.Apply(&raft.Log{Index: idx, Data: e}).(Result)
			if !ok {
				t.Fatalf("entry %d: Apply returned no Result", i)
			}
			rb := b.Apply(&raft.Log{Index: idx, Data: e}).(Result)
			after := a.State()
			if ra.Index != idx || after.Index != idx {
				t.Fatalf("entry %d: index %d / %d", i, ra.Index, after.Index)
			}
			if (ra.Err == nil) != (rb.Err == nil) || ra.Changed != rb.Changed || ra.Granted != rb.Granted {
				t.Fatalf("entry %d: replicas disagree: %+v vs %+v", i, ra, rb)
			}
			if ra.Err != nil {
				if ra.Changed {
					t.Fatalf("entry %d: refused but changed", i)
				}
				before.Index = after.Index
				if !reflect.DeepEqual(before, after) {
					t.Fatalf("entry %d: refused (%v) but the state changed", i, ra.Err)
				}
			}
			for p := range after.Leases {
				lb, la := before.Leases[p], after.Leases[p]
				if la.Epoch < lb.Epoch || (la.Owner != lb.Owner && la.Epoch == lb.Epoch) {
					t.Fatalf("entry %d: partition %d went from %q@%d to %q@%d", i, p, lb.Owner, lb.Epoch, la.Owner, la.Epoch)
				}
			}
			for n, bud := range after.Budget {
				if bud.Spent > bud.Granted || bud.Spent < 0 {
					t.Fatalf("entry %d: member %q spent %d of %d", i, n, bud.Spent, bud.Granted)
				}
			}
			if after.Config.Version < before.Config.Version {
				t.Fatalf("entry %d: config version went back", i)
			}
		}
		sa, sb := a.State(), b.State()
		ja, jb := stateJSON(t, sa), stateJSON(t, sb)
		if !bytes.Equal(ja, jb) {
			t.Fatalf("replicas diverged:\n%s\n%s", ja, jb)
		}
		// Snapshot and restore.
		var buf bytes.Buffer
		snap, _ := a.Snapshot()
		if err := WriteSnapshot(&buf, &snap.(*fsmSnapshot).s); err != nil {
			t.Fatal(err)
		}
		c := NewFSM()
		if err := c.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if jc := stateJSON(t, c.State()); !bytes.Equal(ja, jc) {
			t.Fatalf("restore changed the state:\n%s\n%s", ja, jc)
		}
	})
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// FuzzReadSnapshot reads arbitrary bytes as a persisted FSM snapshot: an error, or a state
// that writes back to a snapshot that reads as the same state.
//
//	go test -run '^$' -fuzz '^FuzzReadSnapshot$' -fuzztime 60s -parallel 1 ./control
func FuzzReadSnapshot(f *testing.F) {
	fsm := NewFSM()
	for i, e := range fuzzSeeds(f)[:10] {
		fsm.Apply(&raft.Log{Index: uint64(i + 1), Data: e})
	}
	var b bytes.Buffer
	s := fsm.State()
	if err := WriteSnapshot(&b, &s); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("\x01{\"members\":null,\"leases\":[{\"owner\":\"x\",\"epoch\":1}]}"))
	f.Add([]byte("\x02{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		if s.Members == nil {
			t.Fatal("nil member map")
		}
		var w bytes.Buffer
		if err := WriteSnapshot(&w, &s); err != nil {
			// A snapshot that read but cannot be written again would stop every later
			// snapshot of this node.
			t.Fatalf("read state cannot be written: %v", err)
		}
		s2, err := ReadSnapshot(bytes.NewReader(w.Bytes()))
		if err != nil {
			t.Fatalf("own snapshot refused: %v", err)
		}
		var w2 bytes.Buffer
		_ = WriteSnapshot(&w2, &s2)
		if !bytes.Equal(w.Bytes(), w2.Bytes()) {
			t.Fatalf("snapshot round trip changed the state")
		}
	})
}
