package control

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/crawlnode/crawlnode/ring"
)

var t0 = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// applyAll applies cmds in order from index 1 and returns the results.
func applyAll(s *State, cmds ...Command) []Result {
	out := make([]Result, len(cmds))
	for i, c := range cmds {
		out[i] = s.Apply(c, s.Index+1)
	}
	return out
}

func member(name string) RegisterMember {
	return RegisterMember{Name: name, Info: MemberInfo{RaftAddr: name + ":7000", HTTPAddr: name + ":8080", JoinedAt: t0}}
}

func TestSetConfigCompareAndSet(t *testing.T) {
	cfg := JobConfig{UserAgent: "crawlnode/1", MaxDepth: 3, DefaultDelay: time.Second, Scope: ScopeAll}
	cases := []struct {
		name        string
		before      []Command
		cmd         Command
		wantErr     error
		wantVersion uint64
		wantUA      string
	}{
		{"first set at version 0", nil, SetConfig{Config: cfg, ExpectVersion: 0, At: t0}, nil, 1, "crawlnode/1"},
		{"stale version refused", []Command{SetConfig{Config: cfg}},
			SetConfig{Config: JobConfig{UserAgent: "x"}, ExpectVersion: 0}, ErrVersionConflict, 1, "crawlnode/1"},
		{"future version refused", nil, SetConfig{Config: cfg, ExpectVersion: 5}, ErrVersionConflict, 0, ""},
		{"second set at version 1", []Command{SetConfig{Config: cfg}},
			SetConfig{Config: JobConfig{UserAgent: "two"}, ExpectVersion: 1}, nil, 2, "two"},
		{"block bumps version so an old read is refused", []Command{SetConfig{Config: cfg}, BlockDomain{Domain: "a.test"}},
			SetConfig{Config: cfg, ExpectVersion: 1}, ErrVersionConflict, 2, "crawlnode/1"},
		{"pause bumps version", []Command{SetConfig{Config: cfg}, Pause{}},
			SetConfig{Config: JobConfig{UserAgent: "y"}, ExpectVersion: 2}, nil, 3, "y"},
		{"bad scope", nil, SetConfig{Config: JobConfig{Scope: "galaxy"}}, ErrInvalidCommand, 0, ""},
		{"negative depth", nil, SetConfig{Config: JobConfig{MaxDepth: -1}}, ErrInvalidCommand, 0, ""},
		{"negative delay", nil, SetConfig{Config: JobConfig{DefaultDelay: -time.Second}}, ErrInvalidCommand, 0, ""},
		{"empty pattern", nil, SetConfig{Config: JobConfig{Include: []string{""}}}, ErrInvalidCommand, 0, ""},
		{"bad blocked domain", nil, SetConfig{Config: JobConfig{BlockedDomains: []string{"http://x/"}}}, ErrInvalidCommand, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s State
			for i, r := range applyAll(&s, c.before...) {
				if r.Err != nil {
					t.Fatalf("setup command %d: %v", i, r.Err)
				}
			}
			r := s.Apply(c.cmd, s.Index+1)
			if !errors.Is(r.Err, c.wantErr) || (c.wantErr == nil) != (r.Err == nil) {
				t.Fatalf("err = %v, want %v", r.Err, c.wantErr)
			}
			if r.Changed != (c.wantErr == nil) {
				t.Fatalf("Changed = %v", r.Changed)
			}
			if s.Config.Version != c.wantVersion || r.ConfigVersion != c.wantVersion {
				t.Fatalf("version = %d (result %d), want %d", s.Config.Version, r.ConfigVersion, c.wantVersion)
			}
			if s.Config.UserAgent != c.wantUA {
				t.Fatalf("user agent = %q, want %q", s.Config.UserAgent, c.wantUA)
			}
		})
	}
}

func TestSetConfigDefaultsAndTime(t *testing.T) {
	var s State
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	r := s.Apply(SetConfig{Config: JobConfig{Version: 99, BlockedDomains: []string{"B.test", "a.test", "b.test."}}, At: at}, 7)
	if r.Err != nil || r.Index != 7 || s.Index != 7 {
		t.Fatalf("result %+v, index %d", r, s.Index)
	}
	if s.Config.Scope != ScopeSeedHosts || s.Config.Version != 1 {
		t.Fatalf("scope %q version %d", s.Config.Scope, s.Config.Version)
	}
	if !s.Config.UpdatedAt.Equal(at) || s.Config.UpdatedAt.Location() != time.UTC {
		t.Fatalf("updated at %v", s.Config.UpdatedAt)
	}
	if !reflect.DeepEqual(s.Config.BlockedDomains, []string{"a.test", "b.test"}) {
		t.Fatalf("blocked %q", s.Config.BlockedDomains)
	}
}

func TestBlockDomainsNormalized(t *testing.T) {
	cases := []struct {
		cmds    []Command
		want    []string
		version uint64
		lastErr error
	}{
		{[]Command{BlockDomain{Domain: "  Example.COM. "}}, []string{"example.com"}, 1, nil},
		{[]Command{BlockDomain{Domain: "b.test"}, BlockDomain{Domain: "A.test"}, BlockDomain{Domain: "B.TEST"}},
			[]string{"a.test", "b.test"}, 2, nil}, // the repeat is a no-op: no version bump
		{[]Command{BlockDomain{Domain: "Bücher.example"}}, []string{"xn--bcher-kva.example"}, 1, nil},
		{[]Command{BlockDomain{Domain: "a.test"}, UnblockDomain{Domain: "A.TEST"}}, []string{}, 2, nil},
		{[]Command{UnblockDomain{Domain: "never.test"}}, nil, 0, nil},
		{[]Command{BlockDomain{Domain: ""}}, nil, 0, ErrInvalidCommand},
		{[]Command{BlockDomain{Domain: "a.test:8080"}}, nil, 0, ErrInvalidCommand},
		{[]Command{BlockDomain{Domain: "a..test"}}, nil, 0, ErrInvalidCommand},
	}
	for i, c := range cases {
		var s State
		rs := applyAll(&s, c.cmds...)
		if last := rs[len(rs)-1]; !errors.Is(last.Err, c.lastErr) || (c.lastErr == nil) != (last.Err == nil) {
			t.Errorf("case %d: err %v, want %v", i, last.Err, c.lastErr)
		}
		if len(s.Config.BlockedDomains) != len(c.want) || (len(c.want) > 0 && !reflect.DeepEqual(s.Config.BlockedDomains, c.want)) {
			t.Errorf("case %d: blocked %q, want %q", i, s.Config.BlockedDomains, c.want)
		}
		if s.Config.Version != c.version {
			t.Errorf("case %d: version %d, want %d", i, s.Config.Version, c.version)
		}
	}
	var s State
	applyAll(&s, BlockDomain{Domain: "Evil.test"})
	for host, want := range map[string]bool{"evil.test": true, "WWW.evil.test": true, "notevil.test": false, "evil.test.org": false} {
		if got := s.Config.Blocked(host); got != want {
			t.Errorf("Blocked(%q) = %v", host, got)
		}
	}
}

func TestPauseResume(t *testing.T) {
	var s State
	rs := applyAll(&s, Pause{At: t0}, Pause{At: t0}, Resume{At: t0.Add(time.Second)})
	if !rs[0].Changed || rs[1].Changed || !rs[2].Changed || s.Config.Paused || s.Config.Version != 2 {
		t.Fatalf("results %+v, state %+v", rs, s.Config)
	}
	if !s.Config.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("updated at %v", s.Config.UpdatedAt)
	}
}

func TestMembers(t *testing.T) {
	var s State
	later := t0.Add(time.Hour)
	rs := applyAll(&s, member("a"),
		RegisterMember{Name: "a", Info: MemberInfo{RaftAddr: "a:7001", HTTPAddr: "a:8080", Voter: true, JoinedAt: later}},
		RegisterMember{Name: "a", Info: MemberInfo{RaftAddr: "a:7001", HTTPAddr: "a:8080", Voter: true, JoinedAt: later}},
		RegisterMember{Name: "", Info: MemberInfo{RaftAddr: "x"}},
		member("b"), RemoveMember{Name: "b"}, RemoveMember{Name: "b"})
	wantChanged := []bool{true, true, false, false, true, true, false}
	for i, r := range rs {
		if r.Changed != wantChanged[i] {
			t.Errorf("command %d: changed %v, want %v (err %v)", i, r.Changed, wantChanged[i], r.Err)
		}
	}
	if !errors.Is(rs[3].Err, ErrInvalidCommand) {
		t.Errorf("nameless member: %v", rs[3].Err)
	}
	a := s.Members["a"]
	if a.RaftAddr != "a:7001" || !a.Voter || !a.JoinedAt.Equal(t0) {
		t.Fatalf("member a = %+v (JoinedAt must be kept from the first registration)", a)
	}
	if _, ok := s.Members["b"]; ok || len(s.Members) != 1 {
		t.Fatalf("members %v", s.Members)
	}
}

func TestAssignLeasesCompareAndSet(t *testing.T) {
	setup := func() *State {
		s := &State{}
		applyAll(s, member("a"), member("b"), member("c"),
			AssignLeases{Moves: []LeaseMove{{Partition: 0, To: "a"}, {Partition: 1, To: "a"}, {Partition: 270, To: "b"}}, At: t0})
		return s
	}
	cases := []struct {
		name      string
		moves     []LeaseMove
		wantErr   error
		conflicts []PartitionLease
		want      map[uint16]Lease // leases after, for the touched partitions
	}{
		{"cooperative move bumps epoch", []LeaseMove{{Partition: 0, From: "a", To: "b", Epoch: 1}}, nil, nil,
			map[uint16]Lease{0: {Owner: "b", Epoch: 2}, 1: {Owner: "a", Epoch: 1}}},
		{"batch", []LeaseMove{{Partition: 0, From: "a", To: "c", Epoch: 1}, {Partition: 270, From: "b", To: "a", Epoch: 1}}, nil, nil,
			map[uint16]Lease{0: {Owner: "c", Epoch: 2}, 270: {Owner: "a", Epoch: 2}}},
		{"stale epoch refused", []LeaseMove{{Partition: 0, From: "a", To: "b", Epoch: 0}}, ErrLeaseConflict,
			[]PartitionLease{{Partition: 0, Owner: "a", Epoch: 1}}, map[uint16]Lease{0: {Owner: "a", Epoch: 1}}},
		{"wrong owner refused", []LeaseMove{{Partition: 1, From: "b", To: "c", Epoch: 1}}, ErrLeaseConflict,
			[]PartitionLease{{Partition: 1, Owner: "a", Epoch: 1}}, map[uint16]Lease{1: {Owner: "a", Epoch: 1}}},
		{"one stale move refuses the batch", []LeaseMove{{Partition: 0, From: "a", To: "b", Epoch: 1}, {Partition: 1, From: "a", To: "b", Epoch: 7}},
			ErrLeaseConflict, []PartitionLease{{Partition: 1, Owner: "a", Epoch: 1}},
			map[uint16]Lease{0: {Owner: "a", Epoch: 1}, 1: {Owner: "a", Epoch: 1}}},
		{"unassigned partition from nobody", []LeaseMove{{Partition: 5, To: "c"}}, nil, nil, map[uint16]Lease{5: {Owner: "c", Epoch: 1}}},
		{"unknown target", []LeaseMove{{Partition: 0, From: "a", To: "zed", Epoch: 1}}, ErrUnknownMember, nil,
			map[uint16]Lease{0: {Owner: "a", Epoch: 1}}},
		{"out of range", []LeaseMove{{Partition: ring.PartitionCount, To: "a"}}, ErrInvalidCommand, nil, nil},
		{"repeated partition", []LeaseMove{{Partition: 0, From: "a", To: "b", Epoch: 1}, {Partition: 0, From: "a", To: "c", Epoch: 1}},
			ErrInvalidCommand, nil, map[uint16]Lease{0: {Owner: "a", Epoch: 1}}},
		{"empty batch", nil, ErrInvalidCommand, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := setup()
			at := t0.Add(time.Minute)
			r := s.Apply(AssignLeases{Moves: c.moves, At: at}, s.Index+1)
			if !errors.Is(r.Err, c.wantErr) || (c.wantErr == nil) != (r.Err == nil) {
				t.Fatalf("err = %v, want %v", r.Err, c.wantErr)
			}
			if !reflect.DeepEqual(r.Conflicts, c.conflicts) {
				t.Fatalf("conflicts = %+v, want %+v", r.Conflicts, c.conflicts)
			}
			for p, want := range c.want {
				got := s.Leases[p]
				if got.Owner != want.Owner || got.Epoch != want.Epoch {
					t.Fatalf("lease %d = %+v, want %+v", p, got, want)
				}
				if c.wantErr == nil && got.Epoch > 1 && !got.Since.Equal(at) {
					t.Fatalf("lease %d since %v, want %v", p, got.Since, at)
				}
			}
			if c.wantErr == nil && len(r.Leases) != len(c.moves) {
				t.Fatalf("result leases %+v", r.Leases)
			}
		})
	}
}

func TestForceLease(t *testing.T) {
	s := &State{}
	applyAll(s, member("a"), member("b"), member("c"),
		AssignLeases{Moves: []LeaseMove{{Partition: 3, To: "a"}}},
		AssignLeases{Moves: []LeaseMove{{Partition: 3, From: "a", To: "b", Epoch: 1}}})
	// b dies; the leader forces partition 3 to c without knowing b's epoch.
	r := s.Apply(ForceLease{Moves: []ForcedMove{{Partition: 3, From: "b", To: "c"}}, At: t0}, s.Index+1)
	if r.Err != nil || s.Leases[3].Owner != "c" || s.Leases[3].Epoch != 3 {
		t.Fatalf("force: %v, lease %+v", r.Err, s.Leases[3])
	}
	// A force decided on the old table (owner b) is refused now that c owns it.
	r = s.Apply(ForceLease{Moves: []ForcedMove{{Partition: 3, From: "b", To: "a"}}}, s.Index+1)
	if !errors.Is(r.Err, ErrLeaseConflict) || s.Leases[3].Owner != "c" || s.Leases[3].Epoch != 3 {
		t.Fatalf("stale force: %v, lease %+v", r.Err, s.Leases[3])
	}
	// The dead owner's late handoff at its old epoch is refused too.
	r = s.Apply(AssignLeases{Moves: []LeaseMove{{Partition: 3, From: "b", To: "a", Epoch: 2}}}, s.Index+1)
	if !errors.Is(r.Err, ErrLeaseConflict) {
		t.Fatalf("late handoff: %v", r.Err)
	}
}

func TestEncodeDecodeAndBadInput(t *testing.T) {
	cmds := []Command{
		SetConfig{Config: JobConfig{UserAgent: "u", Include: []string{"^https://"}, DefaultDelay: time.Second}, ExpectVersion: 4, At: t0},
		BlockDomain{Domain: "a.test", At: t0}, UnblockDomain{Domain: "a.test"}, Pause{At: t0}, Resume{},
		member("a"), RemoveMember{Name: "a"},
		AssignLeases{Moves: []LeaseMove{{Partition: 9, From: "a", To: "b", Epoch: 3}}, At: t0},
		ForceLease{Moves: []ForcedMove{{Partition: 9, From: "b", To: "a"}}, At: t0},
	}
	for _, c := range cmds {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if CommandType(b[0]) != c.Type() {
			t.Fatalf("%T: type byte %d", c, b[0])
		}
		got, err := Decode(b)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("%T: round trip %+v, %v", c, got, err)
		}
	}
	f := NewFSM()
	for i, b := range [][]byte{nil, {0}, {200, '{', '}'}, {byte(TypeSetConfig), 'x'}} {
		r, ok := f.Apply(&raft.Log{Index: uint64(i + 1), Data: b}).(Result)
		if !ok || !errors.Is(r.Err, ErrInvalidCommand) || r.Index != uint64(i+1) {
			t.Fatalf("bad input %v: %+v", b, r)
		}
	}
	if f.State().Index != 4 {
		t.Fatalf("index %d", f.State().Index)
	}
}

type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	f := NewFSM()
	owners := ring.New([]string{"a", "b", "c"}, ring.Config{}).Assignment()
	moves := make([]LeaseMove, len(owners))
	for p, o := range owners {
		moves[p] = LeaseMove{Partition: uint16(p), To: o}
	}
	cmds := []Command{member("a"), member("b"), member("c"),
		SetConfig{Config: JobConfig{UserAgent: "ua", Include: []string{"x"}, Exclude: []string{}, PerHost: 2}, At: t0},
		BlockDomain{Domain: "Z.test", At: t0}, Pause{At: t0.Add(time.Second)},
		AssignLeases{Moves: moves, At: t0},
		AssignLeases{Moves: []LeaseMove{{Partition: 17, From: owners[17], To: "a", Epoch: 1}}, At: t0.Add(time.Minute)},
	}
	for i, c := range cmds {
		b, _ := Encode(c)
		if r := f.Apply(&raft.Log{Index: uint64(10 + i), Data: b}).(Result); r.Err != nil {
			t.Fatalf("command %d: %v", i, r.Err)
		}
	}
	want := f.State()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Changes after Snapshot must not leak into the persisted copy.
	b, _ := Encode(BlockDomain{Domain: "later.test"})
	f.Apply(&raft.Log{Index: 99, Data: b})
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed {
		t.Fatalf("persist: %v closed=%v", err, sink.closed)
	}
	snap.Release()
	g := NewFSM()
	if err := g.Restore(ioNopCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if f.State().Config.Version != want.Config.Version+1 {
		t.Fatal("later command not applied")
	}
	got := g.State()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got.Config, want.Config)
	}
	if got.Leases[17].Owner != "a" || got.Leases[17].Epoch != 2 || len(got.Members) != 3 {
		t.Fatalf("lease 17 %+v members %d", got.Leases[17], len(got.Members))
	}
	// A deep copy: mutating the returned state does not touch the FSM.
	got.Members["zz"] = MemberInfo{}
	got.Config.BlockedDomains[0] = "mutated"
	if _, ok := g.State().Members["zz"]; ok || g.State().Config.BlockedDomains[0] != "z.test" {
		t.Fatal("State() is not a copy")
	}
	if err := g.Restore(ioNopCloser{bytes.NewReader([]byte{9, '{', '}'})}); err == nil {
		t.Fatal("unknown snapshot format accepted")
	}
}

type ioNopCloser struct{ *bytes.Reader }

func (ioNopCloser) Close() error { return nil }

func TestApplyDeterministic(t *testing.T) {
	cmds := []Command{member("b"), member("a"), BlockDomain{Domain: "Q.test", At: t0},
		AssignLeases{Moves: []LeaseMove{{Partition: 1, To: "b"}, {Partition: 2, To: "a"}}, At: t0},
		SetConfig{Config: JobConfig{UserAgent: "z"}, ExpectVersion: 1, At: t0}}
	var s1, s2 State
	r1, r2 := applyAll(&s1, cmds...), applyAll(&s2, cmds...)
	if !reflect.DeepEqual(s1, s2) || !reflect.DeepEqual(r1, r2) {
		t.Fatal("same commands gave different states")
	}
}

// A SetConfig out of bounds is refused by the state machine itself, however it reached
// the log (a forged forwarded command, a node of another build): the configuration stays
// as it was, version included. Each case breaks one bound of JobConfig.Validate.
func TestSetConfigBounds(t *testing.T) {
	good := JobConfig{UserAgent: "bot/1", DefaultDelay: time.Second, PerHost: 1, MaxDepth: 16, Scope: ScopeAll}
	for _, tc := range []struct {
		name  string
		bad   func(*JobConfig)
		wants string
	}{
		{"delay 1ns", func(c *JobConfig) { c.DefaultDelay = 1 }, "default_delay"},
		{"delay a day", func(c *JobConfig) { c.DefaultDelay = 24 * time.Hour }, "default_delay"},
		{"per host 1000", func(c *JobConfig) { c.PerHost = 1000 }, "per_host"},
		{"per host negative", func(c *JobConfig) { c.PerHost = -1 }, "per_host"},
		{"depth", func(c *JobConfig) { c.MaxDepth = MaxJobDepth + 1 }, "max_depth"},
		{"pages per host", func(c *JobConfig) { c.MaxPagesPerHost = MaxJobPagesPerHost + 1 }, "max_pages_per_host"},
		{"pages", func(c *JobConfig) { c.MaxPages = MaxJobPages + 1 }, "max_pages"},
		{"user agent newline", func(c *JobConfig) { c.UserAgent = "a\nb" }, "control character"},
		{"user agent long", func(c *JobConfig) { c.UserAgent = strings.Repeat("a", MaxUserAgent+1) }, "user_agent"},
		{"patterns", func(c *JobConfig) { c.Include = make([]string, MaxJobPatterns+1) }, "patterns"},
		{"long pattern", func(c *JobConfig) { c.Exclude = []string{strings.Repeat("x", MaxPatternLen+1)} }, "pattern over"},
		{"scope", func(c *JobConfig) { c.Scope = "web" }, "scope"},
		{"recrawl min", func(c *JobConfig) { c.RecrawlMin = time.Second }, "recrawl bounds"},
		{"revisit share", func(c *JobConfig) { c.RevisitShare = 2 }, "revisit_share"},
	} {
		f := NewFSM()
		if r := f.Apply(&raft.Log{Index: 1, Data: mustEncode(t, SetConfig{Config: good})}).(Result); r.Err != nil {
			t.Fatalf("good config: %v", r.Err)
		}
		before := f.State().Config
		next := good
		tc.bad(&next)
		r := f.Apply(&raft.Log{Index: 2, Data: mustEncode(t, SetConfig{Config: next, ExpectVersion: before.Version})}).(Result)
		if !errors.Is(r.Err, ErrInvalidCommand) || !strings.Contains(r.Err.Error(), tc.wants) {
			t.Errorf("%s: %v, want an invalid command naming %q", tc.name, r.Err, tc.wants)
		}
		if got := f.State().Config; !reflect.DeepEqual(got, before) {
			t.Errorf("%s: the configuration changed: %+v", tc.name, got)
		}
	}
	// The blocked list has its bound too.
	f := NewFSM()
	st := f.State()
	st.Config.BlockedDomains = make([]string, MaxBlockedDomains)
	f.s = st
	if r := f.Apply(&raft.Log{Index: 1, Data: mustEncode(t, BlockDomain{Domain: "one-more.example"})}).(Result); !errors.Is(r.Err, ErrInvalidCommand) {
		t.Errorf("block past the bound: %v", r.Err)
	}
}

func mustEncode(t *testing.T, c Command) []byte {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
