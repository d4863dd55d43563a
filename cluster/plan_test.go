package cluster

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/gossip"
)

// modRing is a ring the tables can follow by hand: partition p belongs to the p mod n-th
// of the n sorted names.
func modRing(names []string) func(uint16) string {
	return func(p uint16) string {
		if len(names) == 0 {
			return ""
		}
		return names[int(p)%len(names)]
	}
}

func memberAlive(name string) gossip.Member {
	return gossip.Member{Name: name, Status: gossip.StatusAlive,
		Meta: gossip.Meta{State: gossip.StateActive, RaftAddr: name + ":2", HTTPAddr: name + ":3"}}
}

func withStatus(m gossip.Member, st gossip.Status) gossip.Member { m.Status = st; return m }
func withState(m gossip.Member, st gossip.State) gossip.Member   { m.Meta.State = st; return m }

func regOf(names ...string) map[string]control.MemberInfo {
	out := map[string]control.MemberInfo{}
	for _, n := range names {
		out[n] = control.MemberInfo{RaftAddr: n + ":2", HTTPAddr: n + ":3"}
	}
	return out
}

// leases is a four-partition table: owner@epoch per partition ("" unowned).
func leaseTable(owners ...string) []control.Lease {
	out := make([]control.Lease, len(owners))
	for i, o := range owners {
		if o != "" {
			out[i] = control.Lease{Owner: o, Epoch: 1}
		}
	}
	return out
}

func peerOf(name string) control.Peer {
	return control.Peer{Name: name, RaftAddr: name + ":2", HTTPAddr: name + ":3"}
}

// The clock and grace of the leadership tables.
var planNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const planGrace = 30 * time.Second

// leadershipCase is one leader round: its input (on the modRing ring, with now and grace)
// and the plan it must give.
type leadershipCase struct {
	name      string
	self      string
	leaving   bool
	members   []gossip.Member
	registry  map[string]control.MemberInfo
	leases    []control.Lease
	deadSince map[string]time.Time
	handing   map[uint16]bool
	max       int // handoffs at once; 0: maxHandoffs
	want      plan
}

var leadershipCases = []leadershipCase{{
	name:     "first boot: the lone member gets every partition",
	self:     "a",
	members:  []gossip.Member{memberAlive("a")},
	registry: regOf("a"),
	leases:   leaseTable("", "", "", ""),
	want: plan{
		Register: []control.Peer{peerOf("a")},
		Assign: []control.LeaseMove{{Partition: 0, To: "a"}, {Partition: 1, To: "a"},
			{Partition: 2, To: "a"}, {Partition: 3, To: "a"}},
	},
}, {
	name:     "a join: the leader hands the newcomer its ring share, assigns nothing",
	self:     "a",
	members:  []gossip.Member{memberAlive("a"), memberAlive("b")},
	registry: regOf("a", "b"),
	leases:   leaseTable("a", "a", "a", "a"),
	want: plan{
		Register: []control.Peer{peerOf("a"), peerOf("b")},
		Handoffs: []handoffStart{{Partition: 1, To: "b", Epoch: 1}, {Partition: 3, To: "b", Epoch: 1}},
	},
}, {
	name:     "a joiner not yet registered is reconciled but not in the ring",
	self:     "a",
	members:  []gossip.Member{memberAlive("a"), memberAlive("b")},
	registry: regOf("a"),
	leases:   leaseTable("a", "", "a", "a"),
	want: plan{
		Register: []control.Peer{peerOf("a"), peerOf("b")},
		Assign:   []control.LeaseMove{{Partition: 1, To: "a"}},
	},
}, {
	name:    "no raft address yet, or announced left: not reconciled",
	self:    "a",
	members: []gossip.Member{memberAlive("a"), {Name: "b", Status: gossip.StatusAlive}, withState(memberAlive("c"), gossip.StateLeft)},
	// c announces left: out of the ring, its leases stay until it is removed.
	registry: regOf("a", "c"),
	leases:   leaseTable("a", "c", "a", "c"),
	want: plan{
		Register: []control.Peer{peerOf("a")},
	},
}, {
	name:     "graceful leave, draining: the leaving node hands everything to the others",
	self:     "b",
	leaving:  true,
	members:  []gossip.Member{memberAlive("a"), withState(memberAlive("b"), gossip.StateDraining)},
	registry: regOf("a", "b"),
	leases:   leaseTable("a", "b", "a", "b"),
	want: plan{
		Register: []control.Peer{peerOf("a"), peerOf("b")},
		Handoffs: []handoffStart{{Partition: 1, To: "a", Epoch: 1}, {Partition: 3, To: "a", Epoch: 1}},
	},
}, {
	name:      "graceful leave, done: a member that left holding nothing goes before the grace",
	self:      "a",
	members:   []gossip.Member{memberAlive("a"), withStatus(memberAlive("b"), gossip.StatusLeft)},
	registry:  regOf("a", "b"),
	leases:    leaseTable("a", "a", "a", "a"),
	deadSince: map[string]time.Time{"b": planNow.Add(-time.Second)},
	want: plan{
		Register: []control.Peer{peerOf("a")},
		Remove:   []removal{{Name: "b", GoneFor: time.Second, Decommissioned: true}},
	},
}, {
	name:     "a death seen first: marked, nothing moves",
	self:     "a",
	members:  []gossip.Member{memberAlive("a"), withStatus(memberAlive("b"), gossip.StatusDead)},
	registry: regOf("a", "b"),
	leases:   leaseTable("a", "b", "a", "b"),
	want: plan{
		Register:  []control.Peer{peerOf("a")},
		DeadSince: map[string]time.Time{"b": planNow},
	},
}, {
	name:      "a death within the grace: the dead keep their leases",
	self:      "a",
	members:   []gossip.Member{memberAlive("a"), withStatus(memberAlive("b"), gossip.StatusDead), memberAlive("c")},
	registry:  regOf("a", "b", "c"),
	leases:    leaseTable("a", "b", "c", "a"),
	deadSince: map[string]time.Time{"b": planNow.Add(-planGrace + time.Millisecond)},
	want: plan{
		Register:  []control.Peer{peerOf("a"), peerOf("c")},
		DeadSince: map[string]time.Time{"b": planNow.Add(-planGrace + time.Millisecond)},
	},
}, {
	name:      "a death past the grace: removed, its leases forced onto the ring without it",
	self:      "a",
	members:   []gossip.Member{memberAlive("a"), withStatus(memberAlive("b"), gossip.StatusDead), memberAlive("c")},
	registry:  regOf("a", "b", "c"),
	leases:    leaseTable("a", "b", "c", "b"),
	deadSince: map[string]time.Time{"b": planNow.Add(-planGrace)},
	want: plan{
		Register: []control.Peer{peerOf("a"), peerOf("c")},
		Remove:   []removal{{Name: "b", GoneFor: planGrace, Partitions: 2}},
		Force:    []control.ForcedMove{{Partition: 1, From: "b", To: "c"}, {Partition: 3, From: "b", To: "c"}},
		// Ring {a, c}: p2 (held by c) belongs to a; c hands it off, not the leader.
	},
}, {
	name: "a dead node's name taken over by a new process: alive again, mark cleared",
	self: "a",
	members: []gossip.Member{memberAlive("a"), {Name: "b", Status: gossip.StatusAlive,
		Meta: gossip.Meta{State: gossip.StateJoining, RaftAddr: "b2:2", HTTPAddr: "b2:3"}}},
	registry:  regOf("a", "b"),
	leases:    leaseTable("a", "b", "a", "b"),
	deadSince: map[string]time.Time{"b": planNow.Add(-time.Hour)},
	want: plan{
		Register: []control.Peer{peerOf("a"), {Name: "b", RaftAddr: "b2:2", HTTPAddr: "b2:3"}},
	},
}, {
	name: "split views: a registered member gossip never heard of counts as dead",
	self: "a",
	// d is on the other side of a partition since before this leader started.
	members:  []gossip.Member{memberAlive("a")},
	registry: regOf("a", "d"),
	leases:   leaseTable("a", "d", "", "d"),
	want: plan{
		Register:  []control.Peer{peerOf("a")},
		DeadSince: map[string]time.Time{"d": planNow},
		Assign:    []control.LeaseMove{{Partition: 2, To: "a"}},
	},
}, {
	name:     "leases held by a member missing from the registry are forced; a dead target waits",
	self:     "a",
	members:  []gossip.Member{memberAlive("a"), withStatus(memberAlive("b"), gossip.StatusDead)},
	registry: regOf("a", "b"),
	leases:   leaseTable("x", "x", "x", "a"),
	// b is within its grace (marked now): p1 stays with x until b is removed.
	want: plan{
		Register:  []control.Peer{peerOf("a")},
		DeadSince: map[string]time.Time{"b": planNow},
		Force:     []control.ForcedMove{{Partition: 0, From: "x", To: "a"}, {Partition: 2, From: "x", To: "a"}},
		Handoffs:  nil,
	},
}, {
	name:     "a handoff already under way is not started again; the limit counts it",
	self:     "a",
	members:  []gossip.Member{memberAlive("a"), memberAlive("b")},
	registry: regOf("a", "b"),
	leases:   leaseTable("a", "a", "a", "a", "a", "a"),
	handing:  map[uint16]bool{1: true},
	max:      3,
	want: plan{
		Register: []control.Peer{peerOf("a"), peerOf("b")},
		Handoffs: []handoffStart{{Partition: 3, To: "b", Epoch: 1}, {Partition: 5, To: "b", Epoch: 1}},
	},
}, {
	name:     "handoff limit reached: none started",
	self:     "a",
	members:  []gossip.Member{memberAlive("a"), memberAlive("b")},
	registry: regOf("a", "b"),
	leases:   leaseTable("a", "a", "a", "a"),
	handing:  map[uint16]bool{7: true, 8: true},
	max:      2,
	want:     plan{Register: []control.Peer{peerOf("a"), peerOf("b")}},
}, {
	name:     "no handoff to a member without an HTTP address",
	self:     "a",
	members:  []gossip.Member{memberAlive("a"), {Name: "b", Status: gossip.StatusAlive, Meta: gossip.Meta{RaftAddr: "b:2"}}},
	registry: regOf("a", "b"),
	leases:   leaseTable("a", "a", "a", "a"),
	want:     plan{Register: []control.Peer{peerOf("a"), {Name: "b", RaftAddr: "b:2"}}},
}}

func TestPlanLeadership(t *testing.T) {
	for _, tc := range leadershipCases {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = maxHandoffs
			}
			in := planInput{Self: tc.self, Leaving: tc.leaving, Members: tc.members, Registry: tc.registry,
				Leases: tc.leases, DeadSince: tc.deadSince, Now: planNow, Grace: planGrace, Ring: modRing, Handing: tc.handing}
			got := planLeadership(in, max)
			if len(got.DeadSince) == 0 {
				got.DeadSince = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestPlanRemovalsLeavesInputAlone: the leader's times of death are replaced, not
// edited, so a removal that fails keeps its mark.
func TestPlanRemovalsLeavesInputAlone(t *testing.T) {
	now := planNow
	dead := map[string]time.Time{"a": now.Add(-time.Hour), "b": now.Add(-time.Minute)}
	in := planInput{Members: []gossip.Member{memberAlive("a")}, Registry: regOf("a", "b", "c"), Now: now, Grace: time.Hour}
	in.DeadSince = dead
	rm, got := planRemovals(in)
	if len(rm) != 0 {
		t.Errorf("removals %v, want none (b is within the grace)", rm)
	}
	want := map[string]time.Time{"b": now.Add(-time.Minute), "c": now}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dead since %v, want %v", got, want)
	}
	if len(dead) != 2 || dead["a"] != now.Add(-time.Hour) {
		t.Errorf("input changed: %v", dead)
	}
}

func TestPlanSweepForeign(t *testing.T) {
	now := planNow
	ls := leaseTable("a", "b", "", "b", "c")
	cases := []struct {
		name            string
		parts           []uint16
		received        map[uint16]time.Time
		foreign, forget []uint16
	}{
		{"nothing present", nil, nil, nil, nil},
		{"own and unowned are forgotten, others' are sent", []uint16{0, 1, 2, 4}, nil, []uint16{1, 4}, []uint16{0, 2}},
		{"streamed in lately: left for the handoff under way", []uint16{1, 3},
			map[uint16]time.Time{1: now.Add(-receivedKeep + time.Second), 3: now.Add(-receivedKeep)}, []uint16{3}, nil},
	}
	for _, tc := range cases {
		foreign, forget := foreignPartitions("a", tc.parts, ls, tc.received, now)
		if !reflect.DeepEqual(foreign, tc.foreign) || !reflect.DeepEqual(forget, tc.forget) {
			t.Errorf("%s: foreign %v forget %v, want %v %v", tc.name, foreign, forget, tc.foreign, tc.forget)
		}
	}
}

func TestPlanFence(t *testing.T) {
	cases := []struct {
		owns          bool
		hold          int
		blocked       bool
		fenced        bool
		resume, pause bool
	}{
		{owns: true, fenced: true, resume: true},
		{owns: true, fenced: false},
		{owns: false, fenced: false, pause: true},
		{owns: false, fenced: true},
		{owns: true, hold: 1, fenced: false, pause: true},
		{owns: true, hold: 1, fenced: true},
		{owns: true, blocked: true, fenced: false, pause: true},
	}
	for _, tc := range cases {
		resume, pause := fenceDecision(tc.owns, tc.hold, tc.blocked, tc.fenced)
		if resume != tc.resume || pause != tc.pause {
			t.Errorf("%+v: resume %v pause %v", tc, resume, pause)
		}
	}
}

// TestPlanVoters follows the leader's peers into the voter plan Control.Reconcile makes
// of them (control.PlanReconcile, with the voter target of the alive count): the voters
// a round adds, promotes and demotes.
func TestPlanVoters(t *testing.T) {
	voter := func(name string) raft.Server {
		return raft.Server{ID: raft.ServerID(name), Address: raft.ServerAddress(name + ":2"), Suffrage: raft.Voter}
	}
	nonvoter := func(name string) raft.Server {
		s := voter(name)
		s.Suffrage = raft.Nonvoter
		return s
	}
	target := func(n int) int { return control.Config{}.VoterTarget(n) }
	cases := []struct {
		name    string
		conf    []raft.Server
		members []gossip.Member
		want    []control.Action
	}{{
		name:    "a join below the target: the newcomer votes",
		conf:    []raft.Server{voter("a")},
		members: []gossip.Member{memberAlive("a"), memberAlive("b"), memberAlive("c")},
		want:    []control.Action{{Kind: control.AddVoter, Peer: peerOf("b")}, {Kind: control.AddVoter, Peer: peerOf("c")}},
	}, {
		name:    "voter target reached: a newcomer joins without a vote",
		conf:    []raft.Server{voter("a"), voter("b"), voter("c")},
		members: []gossip.Member{memberAlive("a"), memberAlive("b"), memberAlive("c"), memberAlive("d")},
		want:    []control.Action{{Kind: control.AddNonvoter, Peer: peerOf("d")}},
	}, {
		name: "a voter dies: a non-voter is promoted before the dead is demoted",
		conf: []raft.Server{voter("a"), voter("b"), voter("c"), nonvoter("d")},
		members: []gossip.Member{memberAlive("a"), withStatus(memberAlive("b"), gossip.StatusDead),
			memberAlive("c"), memberAlive("d")},
		want: []control.Action{{Kind: control.AddVoter, Peer: peerOf("d")},
			{Kind: control.Demote, Peer: control.Peer{Name: "b", RaftAddr: "b:2"}}},
	}, {
		name:    "a member that announced left is not added",
		conf:    []raft.Server{voter("a")},
		members: []gossip.Member{memberAlive("a"), withState(memberAlive("b"), gossip.StateLeft)},
		want:    nil,
	}}
	for _, tc := range cases {
		peers := registerPeers(tc.members)
		got := control.PlanReconcile(raft.Configuration{Servers: tc.conf}, peers, "a", target(len(peers)))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}
