package cluster

// Who may send what to the cluster's node-to-node routes. The caller's name is the one
// the node's internal handler authenticated (clusterauth: a client certificate, a
// signature under the cluster key, or a loopback caller's claim in development mode);
// these checks hold it against the member registry, gossip and the lease table.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/internal/httpjson"
)

// ErrNotAllowed marks a node-to-node message its authenticated sender may not send.
var ErrNotAllowed = errors.New("not allowed")

// IsMember reports whether name is a member of this cluster: in the member registry (the
// lease table's members), or known to gossip (a node joining, not registered yet). A
// node that is neither may not use an internal route.
func (c *Cluster) IsMember(name string) bool {
	if name == "" {
		return false
	}
	if t := c.tab.Load(); t != nil && registered(t, name) {
		return true
	}
	if name == c.self {
		return true
	}
	if c.gossip == nil {
		return false
	}
	for _, m := range c.gossip.Members() {
		if m.Name == name {
			return true
		}
	}
	return false
}

// callerOf is the authenticated caller of an internal request ("" when none: the request
// did not come through the node's authenticating handler, and is refused).
func callerOf(ctx context.Context) string {
	p, _ := clusterauth.PeerFrom(ctx)
	return p
}

// checkForwarded decides whether peer may have cmd applied by the leader:
//   - job changes (config, pause, blocks): any member; they come from a member's operator
//     API, which checked the operator token, and the FSM validates a configuration as a
//     whole (control.JobConfig.Validate) whoever sends it;
//   - page budget commands: for the sender's own share only;
//   - cooperative lease moves: only partitions the sender gives away (From is the sender:
//     a handoff), never an initial assignment (the leader's own);
//   - the leader's own decisions (registering or removing members, forcing leases): only
//     from a voter (a leader that lost its leadership between deciding and applying).
func (c *Cluster) checkForwarded(peer string, cmd control.Command) error {
	if peer == "" {
		return fmt.Errorf("%w: no authenticated sender", ErrNotAllowed)
	}
	switch m := cmd.(type) {
	case control.SetConfig, control.BlockDomain, control.UnblockDomain, control.Pause, control.Resume:
		return nil
	case control.GrantPages:
		if m.Node != peer {
			return fmt.Errorf("%w: %s asks pages for %q", ErrNotAllowed, peer, m.Node)
		}
		return nil
	case control.ReturnPages:
		if m.Node != peer {
			return fmt.Errorf("%w: %s returns pages of %q", ErrNotAllowed, peer, m.Node)
		}
		return nil
	case control.AssignLeases:
		for _, mv := range m.Moves {
			if mv.From != peer {
				return fmt.Errorf("%w: %s moves partition %d held by %q", ErrNotAllowed, peer, mv.Partition, mv.From)
			}
		}
		return nil
	case control.RegisterMember, control.RemoveMember, control.ForceLease:
		if _, members := c.Table(); members[peer].Voter {
			return nil
		}
		return fmt.Errorf("%w: %s is no voter; %T is the leader's own decision", ErrNotAllowed, peer, cmd)
	}
	return fmt.Errorf("%w: %T is not accepted from another node", ErrNotAllowed, cmd)
}

// refuse answers a message its sender may not send: 403 forbidden.
func refuse(w http.ResponseWriter, err error) {
	httpjson.WriteError(w, http.StatusForbidden, "forbidden", "%v", err)
}
