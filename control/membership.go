package control

import (
	"cmp"
	"slices"

	"github.com/hashicorp/raft"
)

// Peer is a node as gossip sees it.
type Peer struct {
	Name     string
	RaftAddr string
	HTTPAddr string
}

// ActionKind is one step of a membership plan.
type ActionKind int

// Plan steps, in the order they are executed.
const (
	AddVoter    ActionKind = iota + 1 // add a new server as a voter, or promote a non-voter
	AddNonvoter                       // add a new server as a non-voter
	Demote                            // a dead voter becomes a non-voter
)

// Action is one Raft configuration change.
type Action struct {
	Kind ActionKind
	Peer Peer
}

// PlanReconcile returns the Raft configuration changes that bring conf in line with the
// alive members (self, the leader, always counts as alive): alive members missing from
// conf (or at a new address) are added; alive voters are topped up to target by
// promoting alive non-voters (new members last, each group by name); then dead voters
// are demoted. Promotions come first so that quorum never shrinks below the alive
// voters. Alive voters beyond target are kept (no churn); dead non-voters stay in the
// configuration until RemoveMember (a restart keeps its place).
func PlanReconcile(conf raft.Configuration, alive []Peer, self string, target int) []Action {
	byID := make(map[string]raft.Server, len(conf.Servers))
	for _, s := range conf.Servers {
		byID[string(s.ID)] = s
	}
	aliveSet := make(map[string]Peer, len(alive))
	for _, p := range alive {
		if p.Name != "" && p.RaftAddr != "" {
			aliveSet[p.Name] = p
		}
	}
	if s, ok := byID[self]; ok {
		if _, ok := aliveSet[self]; !ok {
			aliveSet[self] = Peer{Name: self, RaftAddr: string(s.Address)}
		}
	}
	names := make([]string, 0, len(aliveSet))
	for n := range aliveSet {
		names = append(names, n)
	}
	slices.Sort(names)

	voters := 0
	var nonvoters, fresh []Peer
	for _, n := range names {
		p := aliveSet[n]
		s, in := byID[n]
		switch {
		case in && s.Suffrage == raft.Voter:
			voters++
		case in && string(s.Address) == p.RaftAddr:
			nonvoters = append(nonvoters, p)
		default: // not in conf, or a non-voter whose address changed
			fresh = append(fresh, p)
		}
	}
	var plan []Action
	candidates := append(nonvoters, fresh...)
	for _, p := range candidates {
		if voters < target {
			plan = append(plan, Action{Kind: AddVoter, Peer: p})
			voters++
		} else if slices.Contains(fresh, p) {
			plan = append(plan, Action{Kind: AddNonvoter, Peer: p})
		}
	}
	// Voters at a changed address keep their vote; re-add them at the new address.
	for _, n := range names {
		if s, ok := byID[n]; ok && s.Suffrage == raft.Voter && string(s.Address) != aliveSet[n].RaftAddr {
			plan = append(plan, Action{Kind: AddVoter, Peer: aliveSet[n]})
		}
	}
	var dead []raft.Server
	for _, s := range conf.Servers {
		if _, ok := aliveSet[string(s.ID)]; !ok && s.Suffrage == raft.Voter {
			dead = append(dead, s)
		}
	}
	slices.SortFunc(dead, func(a, b raft.Server) int { return cmp.Compare(a.ID, b.ID) })
	for _, s := range dead {
		plan = append(plan, Action{Kind: Demote, Peer: Peer{Name: string(s.ID), RaftAddr: string(s.Address)}})
	}
	return plan
}

// RegistryUpdates returns the RegisterMember commands that make the member registry
// match conf (the Voter flag) and the alive peers (addresses), given the registry's
// current entries. Members in neither conf nor alive are left alone.
func RegistryUpdates(conf raft.Configuration, alive []Peer, members map[string]MemberInfo) []RegisterMember {
	aliveSet := make(map[string]Peer, len(alive))
	for _, p := range alive {
		aliveSet[p.Name] = p
	}
	var out []RegisterMember
	for _, s := range conf.Servers {
		name := string(s.ID)
		old, registered := members[name]
		info := old
		info.RaftAddr = string(s.Address)
		info.Voter = s.Suffrage == raft.Voter
		if p, ok := aliveSet[name]; ok && p.HTTPAddr != "" {
			info.HTTPAddr = p.HTTPAddr
		}
		if registered && info == old {
			continue
		}
		if !registered {
			if _, ok := aliveSet[name]; !ok {
				continue // a dead server we know nothing about: nothing to record
			}
		}
		out = append(out, RegisterMember{Name: name, Info: info})
	}
	slices.SortFunc(out, func(a, b RegisterMember) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
