package control

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/crawlnode/crawlnode/ring"
)

// snapshotFormat is the first byte of a persisted snapshot; the JSON State follows.
const snapshotFormat byte = 1

// Apply applies cmd to s as the command at Raft index. It is a pure function of s, cmd and
// index: no clock, no randomness, no map-order dependence. On error s is unchanged
// except for Index.
func (s *State) Apply(cmd Command, index uint64) Result {
	if s.Members == nil {
		s.Members = map[string]MemberInfo{}
	}
	s.Index = index
	r := s.apply(cmd)
	r.Index = index
	r.ConfigVersion = s.Config.Version
	if r.Err != nil {
		r.Changed = false
	}
	return r
}

func (s *State) apply(cmd Command) Result {
	switch c := cmd.(type) {
	case SetConfig:
		return s.setConfig(c)
	case BlockDomain:
		d, err := NormalizeDomain(c.Domain)
		if err != nil {
			return Result{Err: err}
		}
		if slices.Contains(s.Config.BlockedDomains, d) {
			return Result{}
		}
		if len(s.Config.BlockedDomains) >= MaxBlockedDomains {
			return Result{Err: fmt.Errorf("%w: %d blocked domains already, max %d", ErrInvalidCommand, len(s.Config.BlockedDomains), MaxBlockedDomains)}
		}
		next := append(slices.Clone(s.Config.BlockedDomains), d)
		slices.Sort(next)
		s.Config.BlockedDomains = next
		s.bumpConfig(c.At)
		return Result{Changed: true}
	case UnblockDomain:
		d, err := NormalizeDomain(c.Domain)
		if err != nil {
			return Result{Err: err}
		}
		i := slices.Index(s.Config.BlockedDomains, d)
		if i < 0 {
			return Result{}
		}
		s.Config.BlockedDomains = slices.Delete(slices.Clone(s.Config.BlockedDomains), i, i+1)
		s.bumpConfig(c.At)
		return Result{Changed: true}
	case Pause:
		return s.setPaused(true, c.At)
	case Resume:
		return s.setPaused(false, c.At)
	case RegisterMember:
		if c.Name == "" || c.Info.RaftAddr == "" {
			return Result{Err: fmt.Errorf("%w: member needs a name and a raft address", ErrInvalidCommand)}
		}
		info := c.Info
		info.JoinedAt = info.JoinedAt.UTC()
		if old, ok := s.Members[c.Name]; ok {
			info.JoinedAt = old.JoinedAt
			if old == info {
				return Result{}
			}
		}
		s.Members[c.Name] = info
		return Result{Changed: true}
	case RemoveMember:
		if _, ok := s.Members[c.Name]; !ok {
			return Result{}
		}
		delete(s.Members, c.Name)
		return Result{Changed: true}
	case AssignLeases:
		moves := make([]ForcedMove, len(c.Moves))
		for i, m := range c.Moves {
			moves[i] = ForcedMove{Partition: m.Partition, From: m.From, To: m.To}
		}
		return s.moveLeases(moves, func(i int, l Lease) bool {
			return l.Owner == c.Moves[i].From && l.Epoch == c.Moves[i].Epoch
		}, c.At)
	case ForceLease:
		r := s.moveLeases(c.Moves, func(i int, l Lease) bool {
			return l.Owner == c.Moves[i].From
		}, c.At)
		if r.Err == nil {
			s.reclaimPages(c.Moves)
		}
		return r
	case GrantPages:
		return s.grantPages(c)
	case ReturnPages:
		return s.returnPages(c)
	default:
		return Result{Err: fmt.Errorf("%w: unknown command %T", ErrInvalidCommand, cmd)}
	}
}

// spend records a member's reported spending (absolute, never going back, at most its
// grant) and returns its share.
func (s *State) spend(node string, spent int64) (PageBudget, error) {
	if node == "" || spent < 0 {
		return PageBudget{}, fmt.Errorf("%w: a page budget command needs a member and a spending >= 0", ErrInvalidCommand)
	}
	b := s.Budget[node]
	b.Spent = min(max(b.Spent, spent), b.Granted)
	return b, nil
}

func (s *State) grantPages(c GrantPages) Result {
	if c.Ask < 0 {
		return Result{Err: fmt.Errorf("%w: ask %d", ErrInvalidCommand, c.Ask)}
	}
	b, err := s.spend(c.Node, c.Spent)
	if err != nil {
		return Result{Err: err}
	}
	granted, _ := s.BudgetTotals()
	g := GrantSize(s.Config.MaxPages, granted, len(s.Members), c.Ask)
	b.Granted += g
	old := s.Budget[c.Node]
	if s.Budget == nil {
		s.Budget = map[string]PageBudget{}
	}
	s.Budget[c.Node] = b
	return Result{Changed: b != old, Granted: g, Budget: &b}
}

func (s *State) returnPages(c ReturnPages) Result {
	b, err := s.spend(c.Node, c.Spent)
	if err != nil {
		return Result{Err: err}
	}
	old, ok := s.Budget[c.Node]
	b.Granted = b.Spent
	if ok {
		s.Budget[c.Node] = b
	}
	return Result{Changed: b != old, Budget: &b}
}

// reclaimPages gives back the unspent grants of owners whose leases were forced away (dead
// longer than the grace period), so the cluster's limit can still be reached. What such an
// owner fetched after its last report is granted again: the cluster may fetch up to that
// many pages past the limit.
func (s *State) reclaimPages(moves []ForcedMove) {
	for _, m := range moves {
		if b, ok := s.Budget[m.From]; ok && b.Granted > b.Spent {
			b.Granted = b.Spent
			s.Budget[m.From] = b
		}
	}
}

func (s *State) bumpConfig(at time.Time) {
	s.Config.Version++
	s.Config.UpdatedAt = at.UTC()
}

func (s *State) setPaused(p bool, at time.Time) Result {
	if s.Config.Paused == p {
		return Result{}
	}
	s.Config.Paused = p
	s.bumpConfig(at)
	return Result{Changed: true}
}

func (s *State) setConfig(c SetConfig) Result {
	if c.ExpectVersion != s.Config.Version {
		return Result{Err: fmt.Errorf("%w: expected version %d, current %d",
			ErrVersionConflict, c.ExpectVersion, s.Config.Version)}
	}
	next := c.Config.clone()
	if next.Scope == "" {
		next.Scope = ScopeSeedHosts
	}
	if err := next.Validate(); err != nil {
		return Result{Err: err}
	}
	bd, err := normalizeDomains(next.BlockedDomains)
	if err != nil {
		return Result{Err: err}
	}
	next.BlockedDomains = bd
	next.Version = s.Config.Version
	s.Config = next
	s.bumpConfig(c.At)
	return Result{Changed: true}
}

// moveLeases applies moves all or none: match(i, current) decides whether move i is still
// valid against the table.
func (s *State) moveLeases(moves []ForcedMove, match func(int, Lease) bool, at time.Time) Result {
	if len(moves) == 0 {
		return Result{Err: fmt.Errorf("%w: no moves", ErrInvalidCommand)}
	}
	seen := make(map[uint16]bool, len(moves))
	var conflicts []PartitionLease
	for i, m := range moves {
		if int(m.Partition) >= ring.PartitionCount || seen[m.Partition] {
			return Result{Err: fmt.Errorf("%w: partition %d out of range or repeated", ErrInvalidCommand, m.Partition)}
		}
		seen[m.Partition] = true
		if _, ok := s.Members[m.To]; !ok {
			return Result{Err: fmt.Errorf("%w: %q (partition %d)", ErrUnknownMember, m.To, m.Partition)}
		}
		if l := s.Leases[m.Partition]; !match(i, l) {
			conflicts = append(conflicts, PartitionLease{Partition: m.Partition, Owner: l.Owner, Epoch: l.Epoch})
		}
	}
	if len(conflicts) > 0 {
		return Result{Err: fmt.Errorf("%w: %d of %d moves stale (first: partition %d is %q at epoch %d)",
			ErrLeaseConflict, len(conflicts), len(moves), conflicts[0].Partition, conflicts[0].Owner, conflicts[0].Epoch),
			Conflicts: conflicts}
	}
	out := make([]PartitionLease, 0, len(moves))
	for _, m := range moves {
		l := &s.Leases[m.Partition]
		l.Owner, l.Epoch, l.Since = m.To, l.Epoch+1, at.UTC()
		out = append(out, PartitionLease{Partition: m.Partition, Owner: l.Owner, Epoch: l.Epoch})
	}
	return Result{Changed: true, Leases: out}
}

// FSM is the raft.FSM over a State. Apply runs on Raft's FSM goroutine; State may be
// called from any goroutine.
type FSM struct {
	mu sync.RWMutex
	s  State
	// onApply, if set, is called after each applied command with its result, outside
	// the lock. It must not block (Control uses it to wake waiters).
	onApply func(Result)
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an FSM over the zero State.
func NewFSM() *FSM { return &FSM{s: State{Members: map[string]MemberInfo{}}} }

// State returns a deep copy of the current state.
func (f *FSM) State() State {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.Clone()
}

// lease returns one lease without copying the whole state.
func (f *FSM) lease(p uint16) Lease {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.Leases[p]
}

func (f *FSM) member(name string) (MemberInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	m, ok := f.s.Members[name]
	return m, ok
}

// Apply implements raft.FSM. It returns a Result (never an error value or a panic) for
// every log entry, including undecodable ones.
func (f *FSM) Apply(l *raft.Log) interface{} {
	var r Result
	cmd, err := Decode(l.Data)
	f.mu.Lock()
	if err != nil {
		f.s.Index = l.Index
		r = Result{Index: l.Index, Err: err, ConfigVersion: f.s.Config.Version}
	} else {
		r = f.s.Apply(cmd, l.Index)
	}
	f.mu.Unlock()
	if f.onApply != nil {
		f.onApply(r)
	}
	return r
}

// Snapshot implements raft.FSM: it copies the state (cheap: 271 leases and a few members),
// so Persist can run while later commands are applied.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{s: f.State()}, nil
}

// Restore implements raft.FSM: it replaces the state with a persisted snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := ReadSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.s = s
	f.mu.Unlock()
	return nil
}

// WriteSnapshot writes s in the snapshot format: one format byte, then JSON.
func WriteSnapshot(w io.Writer, s *State) error {
	bw := bufio.NewWriter(w)
	if err := bw.WriteByte(snapshotFormat); err != nil {
		return err
	}
	if err := json.NewEncoder(bw).Encode(s); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadSnapshot reads what WriteSnapshot wrote.
func ReadSnapshot(r io.Reader) (State, error) {
	br := bufio.NewReader(r)
	v, err := br.ReadByte()
	if err != nil {
		return State{}, fmt.Errorf("control: read snapshot: %w", err)
	}
	if v != snapshotFormat {
		return State{}, fmt.Errorf("control: snapshot format %d not supported", v)
	}
	var s State
	if err := json.NewDecoder(br).Decode(&s); err != nil {
		return State{}, fmt.Errorf("control: decode snapshot: %w", err)
	}
	if s.Members == nil {
		s.Members = map[string]MemberInfo{}
	}
	return s, nil
}

type fsmSnapshot struct{ s State }

func (f *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, &f.s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (f *fsmSnapshot) Release() {}
