package gossip

import (
	"slices"
	"strings"
)

// Status is what this node's memberlist currently believes about a member.
type Status string

// Member statuses. memberlist's "suspect" state is not surfaced: memberlist offers no
// race-free way to read it (Members() hands out pointers into its live table) and no
// callback for it, so a suspect member reads as alive until it is declared dead.
const (
	StatusAlive Status = "alive"
	StatusDead  Status = "dead" // failed: declared dead by the failure detector
	StatusLeft  Status = "left" // left gracefully (Leave)
)

// EventKind says how a member changed.
type EventKind int

// Event kinds.
const (
	// EventJoin: a member the consumer did not know as alive is alive (new member, or a
	// return after a failure or leave that the consumer was told about).
	EventJoin EventKind = iota + 1
	// EventLeave: a member the consumer knew as alive left gracefully.
	EventLeave
	// EventFail: a member the consumer knew as alive was declared dead.
	EventFail
	// EventUpdate: a member the consumer knew as alive is still alive but something happened:
	// new metadata or address, or it failed and came back within one batch (a fast restart;
	// Meta.Started tells).
	EventUpdate
)

func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	case EventUpdate:
		return "update"
	}
	return "unknown"
}

// Member is one node as seen by this node.
type Member struct {
	Name   string
	Addr   string // gossip address, host:port
	Meta   Meta   // zero if the peer's metadata did not decode (logged)
	Status Status
}

// Event is one member's net change since the last batch the consumer received.
type Event struct {
	Kind   EventKind
	Member Member // the member's latest state
}

// rawEvent is what a memberlist callback records: a numbered snapshot of one member.
type rawEvent struct {
	seq     uint64 // order of callbacks (they never run concurrently)
	member  Member
	metaErr error // the peer's metadata did not decode (logged by the loop)
}

// coalescer folds raw events into per-member net changes. It is pure and owned by the event
// loop. Policy:
//   - per member only the latest raw event counts (highest seq; older ones arriving later,
//     e.g. from the channel after an overflow slot, are ignored);
//   - the kind of the delivered event compares the latest status with the status the
//     consumer last received: alive after not-alive is Join, alive after alive is Update,
//     dead/left after alive is Fail/Leave; a member that ends not-alive and was never
//     delivered alive produces nothing (join+fail inside one batch), and neither does a
//     repeat of the status already delivered (dead -> join -> dead);
//   - a batch is sorted by member name.
type coalescer struct {
	pending   map[string]rawEvent
	lastSeq   map[string]uint64 // highest seq seen per member
	delivered map[string]Status // status in the last batch the consumer took
}

func newCoalescer() *coalescer {
	return &coalescer{
		pending:   make(map[string]rawEvent),
		lastSeq:   make(map[string]uint64),
		delivered: make(map[string]Status),
	}
}

// add records ev and reports whether it changed the pending set.
func (c *coalescer) add(ev rawEvent) bool {
	name := ev.member.Name
	if ev.seq <= c.lastSeq[name] {
		return false
	}
	c.lastSeq[name] = ev.seq
	c.pending[name] = ev
	return true
}

// len is the number of members with pending changes.
func (c *coalescer) len() int { return len(c.pending) }

// batch computes the events the pending changes amount to, without consuming them.
func (c *coalescer) batch() []Event {
	var out []Event
	for name, ev := range c.pending {
		if k, ok := eventKind(c.delivered[name], ev.member.Status); ok {
			out = append(out, Event{Kind: k, Member: ev.member})
		}
	}
	slices.SortFunc(out, func(a, b Event) int { return strings.Compare(a.Member.Name, b.Member.Name) })
	return out
}

// commit marks the pending changes as delivered.
func (c *coalescer) commit() {
	for name, ev := range c.pending {
		prev := c.delivered[name]
		if _, ok := eventKind(prev, ev.member.Status); ok {
			c.delivered[name] = ev.member.Status
		}
		delete(c.pending, name)
	}
}

// forget drops all state about name (reaped member), unless a change is pending.
func (c *coalescer) forget(name string) {
	if _, ok := c.pending[name]; ok {
		return
	}
	delete(c.lastSeq, name)
	delete(c.delivered, name)
}

// eventKind is the event a member's move from prev (last delivered; "" = never) to cur
// amounts to; ok is false when the consumer needs no event.
func eventKind(prev, cur Status) (EventKind, bool) {
	switch cur {
	case StatusAlive:
		if prev == StatusAlive {
			return EventUpdate, true
		}
		return EventJoin, true
	case StatusLeft, StatusDead:
		if prev == "" || prev == cur {
			return 0, false
		}
		if cur == StatusLeft {
			return EventLeave, true
		}
		return EventFail, true
	}
	return 0, false
}
