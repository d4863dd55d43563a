package cluster

// The cluster's decisions as plain functions over values: no network, no clock, no Raft
// (STYLE.md, "Pure decisions, I/O at the edges"). The leader's round (lead), the handoffs
// (startHandoffs) and the sweep (foreign) gather their input, call these and apply the
// result. The leader's round runs in three phases because each reads the lease table the
// previous one's commits left:
//
//	registerPeers ──Reconcile──▶ planRemovals ──RemoveMember──▶ planLeases ──AssignLeases, ForceLease
//
// Voter additions and promotions are not planned here: Control.Reconcile plans them with
// control.PlanReconcile (pure too) from the Raft configuration and its voter target,
// given the peers registerPeers chooses. planLeadership composes the phases for a round
// in which every removal succeeds (what the tables of plan_test.go describe).

import (
	"slices"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/gossip"
)

// ringFunc builds the ring over names and returns its owner of a partition.
type ringFunc func(names []string) func(p uint16) string

// planInput is what the cluster's decisions look at.
type planInput struct {
	Self    string
	Leaving bool // this node is decommissioning: the ring leaves it out
	// Members is gossip's view: every member it knows, with its status and metadata.
	Members []gossip.Member
	// Registry is the Raft member registry; Leases the lease table, by partition.
	Registry map[string]control.MemberInfo
	Leases   []control.Lease
	// DeadSince is when the leader first saw each registered member not alive.
	DeadSince map[string]time.Time
	Now       time.Time
	Grace     time.Duration
	Ring      ringFunc
	// Handing is the partitions whose handoff from here is under way.
	Handing map[uint16]bool
}

// removal is a member the leader removes from Raft and the registry.
type removal struct {
	Name           string
	GoneFor        time.Duration
	Partitions     int  // leases it still holds
	Decommissioned bool // it left gracefully and holds nothing
}

// handoffStart is a handoff of Partition, held here at Epoch, to To.
type handoffStart struct {
	Partition uint16
	To        string
	Epoch     uint64
}

// plan is one leader round's decisions and this node's handoffs to start.
type plan struct {
	Register  []control.Peer
	Remove    []removal
	DeadSince map[string]time.Time
	Assign    []control.LeaseMove
	Force     []control.ForcedMove
	Handoffs  []handoffStart
}

// planLeadership is one round of the leader (in.Self) when every removal succeeds: the
// peers to register, the members to remove, then the leases to assign or force and the
// handoffs to start over the registry without the removed.
func planLeadership(in planInput, maxHandoffs int) plan {
	var p plan
	p.Register = registerPeers(in.Members)
	p.Remove, p.DeadSince = planRemovals(in)
	if len(p.Remove) > 0 {
		reg := make(map[string]control.MemberInfo, len(in.Registry))
		for name, mi := range in.Registry {
			reg[name] = mi
		}
		for _, r := range p.Remove {
			delete(reg, r.Name)
			delete(p.DeadSince, r.Name)
		}
		in.Registry = reg
	}
	in.DeadSince = p.DeadSince
	p.Assign, p.Force = planLeases(in)
	p.Handoffs = planHandoffs(in, maxHandoffs)
	return p
}

// registerPeers is the leader's Reconcile input: the alive members that announce a Raft
// address and have not left, by name.
func registerPeers(members []gossip.Member) []control.Peer {
	var peers []control.Peer
	for _, m := range members {
		if m.Status != gossip.StatusAlive || m.Meta.RaftAddr == "" || m.Meta.State == gossip.StateLeft {
			continue
		}
		peers = append(peers, control.Peer{Name: m.Name, RaftAddr: m.Meta.RaftAddr, HTTPAddr: m.Meta.HTTPAddr})
	}
	slices.SortFunc(peers, func(a, b control.Peer) int { return strings.Compare(a.Name, b.Name) })
	return peers
}

// planRemovals returns the registered members to remove, by name, and the new times of
// death: a registered member not alive is first marked dead at Now; it is removed once
// dead for Grace, or at once when it left gracefully (gossip says left) holding no lease.
// An alive member's mark is cleared.
func planRemovals(in planInput) ([]removal, map[string]time.Time) {
	alive := aliveByName(in.Members)
	status := map[string]gossip.Status{}
	for _, m := range in.Members {
		status[m.Name] = m.Status
	}
	owned := map[string]int{}
	for _, l := range in.Leases {
		owned[l.Owner]++
	}
	dead := make(map[string]time.Time, len(in.DeadSince))
	for name, at := range in.DeadSince {
		dead[name] = at
	}
	var out []removal
	for _, name := range sortedKeys(in.Registry) {
		if _, ok := alive[name]; ok {
			delete(dead, name)
			continue
		}
		since, ok := dead[name]
		if !ok {
			dead[name] = in.Now
			continue
		}
		decommissioned := status[name] == gossip.StatusLeft && owned[name] == 0
		if gone := in.Now.Sub(since); decommissioned || gone >= in.Grace {
			out = append(out, removal{Name: name, GoneFor: gone, Partitions: owned[name], Decommissioned: decommissioned})
		}
	}
	return out, dead
}

// ringMembers is who the ring is built over: the registered members, less those gossip
// says left or that announce draining or left, less this node while it decommissions.
// Sorted.
func ringMembers(in planInput) []string {
	states := map[string]gossip.Member{}
	for _, m := range in.Members {
		states[m.Name] = m
	}
	var names []string
	for name := range in.Registry {
		m, known := states[name]
		if known && (m.Status == gossip.StatusLeft || m.Meta.State == gossip.StateDraining || m.Meta.State == gossip.StateLeft) {
			continue
		}
		if name == in.Self && in.Leaving {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// planLeases returns the leases the leader assigns (unowned partitions, to their ring
// owner) and forces (partitions held by a member no longer registered, to their ring
// owner). A partition whose ring owner is not alive is left alone.
func planLeases(in planInput) ([]control.LeaseMove, []control.ForcedMove) {
	owner := in.Ring(ringMembers(in))
	alive := aliveByName(in.Members)
	var assign []control.LeaseMove
	var force []control.ForcedMove
	for i, l := range in.Leases {
		p := uint16(i)
		target := owner(p)
		if target == "" {
			continue
		}
		if _, ok := alive[target]; !ok {
			continue
		}
		_, registered := in.Registry[l.Owner]
		switch {
		case l.Owner == "":
			assign = append(assign, control.LeaseMove{Partition: p, From: "", To: target, Epoch: l.Epoch})
		case !registered:
			force = append(force, control.ForcedMove{Partition: p, From: l.Owner, To: target})
		}
	}
	return assign, force
}

// planHandoffs returns the handoffs this node (in.Self) starts: partitions it holds whose
// ring owner is another alive member that is not draining or left and announces an HTTP
// address, skipping those whose handoff is under way, at most max running in all.
func planHandoffs(in planInput, max int) []handoffStart {
	owner := in.Ring(ringMembers(in))
	alive := aliveByName(in.Members)
	running := len(in.Handing)
	var out []handoffStart
	for i, l := range in.Leases {
		if running >= max {
			break
		}
		p := uint16(i)
		if l.Owner != in.Self {
			continue
		}
		target := owner(p)
		if target == "" || target == in.Self {
			continue
		}
		m, ok := alive[target]
		if !ok || m.Meta.State == gossip.StateDraining || m.Meta.State == gossip.StateLeft || m.Meta.HTTPAddr == "" {
			continue
		}
		if in.Handing[p] {
			continue
		}
		running++
		out = append(out, handoffStart{Partition: p, To: target, Epoch: l.Epoch})
	}
	return out
}

// foreignPartitions is the sweep's choice among the partitions present here (parts):
// those whose lease another member holds, except those streamed in less than
// receivedKeep ago (a handoff to here still under way). forget lists the partitions
// whose received mark goes: leased here or to no one.
func foreignPartitions(self string, parts []uint16, leases []control.Lease, received map[uint16]time.Time, now time.Time) (foreign, forget []uint16) {
	for _, p := range parts {
		owner := leases[p].Owner
		if owner == self || owner == "" {
			forget = append(forget, p)
			continue
		}
		if at, ok := received[p]; ok && now.Sub(at) < receivedKeep {
			continue
		}
		foreign = append(foreign, p)
	}
	return foreign, forget
}

// receivedKeep is how long the sweep leaves alone a partition streamed in before its
// lease moved here: the handoff that sent it is still under way.
const receivedKeep = time.Minute

// fenceDecision is fence's choice for one partition: whether it may be fetched, and so
// whether to resume or pause it given whether it is fenced now.
func fenceDecision(owns bool, hold int, blocked, fenced bool) (resume, pause bool) {
	want := owns && hold == 0 && !blocked
	return want && fenced, !want && !fenced
}

func aliveByName(members []gossip.Member) map[string]gossip.Member {
	out := map[string]gossip.Member{}
	for _, m := range members {
		if m.Status == gossip.StatusAlive {
			out[m.Name] = m
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
