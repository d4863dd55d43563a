package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("ring: invalid config")

// Defaults for Config's zero fields.
const (
	// DefaultReplicationFactor is the number of virtual nodes per member.
	DefaultReplicationFactor = 20
	// DefaultLoad is the bounded-load factor.
	DefaultLoad = 1.25
)

// Config shapes a Ring. The zero Config means every default.
type Config struct {
	// PartitionCount is the number of partitions (1..65536). Default PartitionCount (271).
	// It is part of the data format: every node must use the same value for the whole crawl.
	// OwnerOfHost hashes with the same function as PartitionOf, modulo this count.
	PartitionCount int

	// ReplicationFactor is the number of virtual nodes each member puts on the hash circle.
	// Default 20. More virtual nodes spread partitions more evenly and cost a little more
	// memory and build time (New is O(members x ReplicationFactor) plus sorting).
	ReplicationFactor int

	// Load is the bounded-load factor (>= 1): no member owns more than
	// floor(Load x PartitionCount / members) partitions. Default 1.25. A lower value evens
	// the load but moves more partitions on a membership change (more spill-over).
	// The bound is raised to floor(PartitionCount/members)+1 whenever it is smaller, so that
	// the partitions always fit: at 100 members that is 3 partitions (max/mean 1.11); at 200,
	// 2 (max/mean 1.48); beyond PartitionCount members, 1, and some members own nothing.
	// Ring.Capacity reports the bound actually used.
	Load float64
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.PartitionCount == 0 {
		c.PartitionCount = PartitionCount
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Load == 0 {
		c.Load = DefaultLoad
	}
	return c
}

// Validate reports whether c (after WithDefaults) can build a ring.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.PartitionCount < 1 || c.PartitionCount > math.MaxUint16+1:
		return fmt.Errorf("%w: partition count %d not in 1..65536", ErrInvalidConfig, c.PartitionCount)
	case c.ReplicationFactor < 1:
		return fmt.Errorf("%w: replication factor %d < 1", ErrInvalidConfig, c.ReplicationFactor)
	case math.IsNaN(c.Load) || math.IsInf(c.Load, 0) || c.Load < 1:
		return fmt.Errorf("%w: load %v not a finite number >= 1", ErrInvalidConfig, c.Load)
	}
	return nil
}

// Member is a ring member as buraksezer/consistent sees it.
type Member struct{ Name string }

// String returns the member's name.
func (m Member) String() string { return m.Name }

// hasher is xxhash64, the hash PartitionOf uses, so consistent.FindPartitionID(key) equals
// PartitionOf(key).
type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// Ring maps partitions to owners for one member set. It is immutable once built and safe
// for concurrent use. A nil *Ring behaves as a ring with no members.
type Ring struct {
	count    int
	capacity int
	members  []string            // sorted
	owners   []string            // index = partition
	parts    map[string][]uint16 // member -> sorted partitions
	byHash   []string            // members sorted by xxhash(name): consistent's backup order
	hashPos  map[string]int      // member -> index in byHash
}

// New builds the ring of members under cfg. The member list is a set: order and duplicates
// do not matter, and empty names are ignored. The same set always yields the same owners on
// every node. An empty set gives a ring where every partition has owner "".
// New panics if cfg.Validate fails; validate configs that come from users first.
func New(members []string, cfg Config) *Ring {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.WithDefaults()
	set := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			set = append(set, m)
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)

	r := &Ring{
		count:   cfg.PartitionCount,
		members: set,
		parts:   make(map[string][]uint16, len(set)),
		hashPos: make(map[string]int, len(set)),
	}
	if len(set) == 0 {
		r.owners = make([]string, r.count)
		return r
	}
	r.capacity = capacityFor(len(set), cfg)
	if useConsistent(len(set), cfg) {
		r.owners = placeConsistent(set, cfg, r.capacity)
	} else {
		r.owners = placeBounded(set, cfg, r.capacity)
	}
	for p, o := range r.owners {
		r.parts[o] = append(r.parts[o], uint16(p))
	}
	r.byHash = slices.Clone(set)
	sort.Slice(r.byHash, func(i, j int) bool {
		hi, hj := xxhash.Sum64String(r.byHash[i]), xxhash.Sum64String(r.byHash[j])
		if hi != hj {
			return hi < hj
		}
		return r.byHash[i] < r.byHash[j]
	})
	for i, m := range r.byHash {
		r.hashPos[m] = i
	}
	return r
}

// capacityFor is the most partitions one of n members may own: floor(Load x count / n),
// raised to floor(count/n)+1 so that n x capacity > count and placement always succeeds.
func capacityFor(n int, cfg Config) int {
	c := int(math.Floor(cfg.Load*float64(cfg.PartitionCount)/float64(n) + 1e-9))
	return max(c, cfg.PartitionCount/n+1)
}

// useConsistent reports whether buraksezer/consistent can place n members without
// panicking. consistent caps each member at ceil(floor(count/n) x load), which is 0 when
// n > count, and its spill-over walk skips one virtual node, so a member with a single
// virtual node can be missed. With n <= count and >= 2 virtual nodes per member (vnodes
// "name0".."name9" can never be overwritten by a later member's, see placeBounded), the
// walk always reaches a member with room because n x capacity > count.
func useConsistent(n int, cfg Config) bool {
	return n <= cfg.PartitionCount && cfg.ReplicationFactor >= 2
}

// consistentConfig is the consistent.Config that makes consistent cap each member at
// capacity: consistent uses ceil(floor(count/n) x Load), so Load = (capacity-0.5)/floor(count/n).
func consistentConfig(n int, cfg Config, capacity int) consistent.Config {
	k := cfg.PartitionCount / n
	return consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              (float64(capacity) - 0.5) / float64(k),
	}
}

// placeConsistent places members (sorted: consistent's ring depends on insertion order when
// virtual-node keys collide) with buraksezer/consistent.
func placeConsistent(members []string, cfg Config, capacity int) []string {
	ms := make([]consistent.Member, len(members))
	for i, m := range members {
		ms[i] = Member{Name: m}
	}
	c := consistent.New(ms, consistentConfig(len(members), cfg, capacity))
	owners := make([]string, cfg.PartitionCount)
	for p := range owners {
		owners[p] = c.GetPartitionOwner(p).String()
	}
	return owners
}

// placeBounded is consistent's bounded-load placement, step for step, for the member counts
// consistent cannot handle: each member puts ReplicationFactor virtual nodes
// xxhash(name+strconv(i)) on the circle, inserted in sorted member order (a later member
// overwrites an equal key); partition p starts at the first virtual node at or after
// xxhash(little-endian uint64 p) and walks clockwise to the first member with fewer than
// capacity partitions. TestPlaceBoundedMatchesConsistent holds it to consistent.
func placeBounded(members []string, cfg Config, capacity int) []string {
	owner := make(map[uint64]string, len(members)*cfg.ReplicationFactor)
	points := make([]uint64, 0, len(members)*cfg.ReplicationFactor)
	var buf []byte
	for _, m := range members {
		for i := 0; i < cfg.ReplicationFactor; i++ {
			buf = strconv.AppendInt(append(buf[:0], m...), int64(i), 10)
			h := xxhash.Sum64(buf)
			owner[h] = m
			points = append(points, h)
		}
	}
	slices.Sort(points)

	owners := make([]string, cfg.PartitionCount)
	load := make(map[string]int, len(members))
	var key [8]byte
	for p := range owners {
		binary.LittleEndian.PutUint64(key[:], uint64(p))
		h := xxhash.Sum64(key[:])
		idx, _ := slices.BinarySearch(points, h)
		for step := 0; ; step++ {
			if step == len(points) {
				// Unreachable: len(members) x capacity > PartitionCount and every member keeps
				// its virtual node 0 (see useConsistent).
				panic(fmt.Sprintf("ring: no room for partition %d", p))
			}
			if idx >= len(points) {
				idx = 0
			}
			m := owner[points[idx]]
			if load[m] < capacity {
				owners[p] = m
				load[m]++
				break
			}
			idx++
		}
	}
	return owners
}

// Members returns the members, sorted.
func (r *Ring) Members() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// Capacity returns the most partitions any member may own (see Config.Load); 0 when the
// ring has no members.
func (r *Ring) Capacity() int {
	if r == nil {
		return 0
	}
	return r.capacity
}

// Owner returns the member that owns partition, or "" when the ring has no members or the
// partition is out of range.
func (r *Ring) Owner(partition uint16) string {
	if r == nil || int(partition) >= len(r.owners) {
		return ""
	}
	return r.owners[partition]
}

// OwnerOfHost returns the owner of the host key's partition (PartitionOf(hostKey) with the
// default partition count).
func (r *Ring) OwnerOfHost(hostKey string) string {
	if r == nil || r.count == 0 {
		return ""
	}
	return r.owners[xxhash.Sum64String(SiteKey(hostKey))%uint64(r.count)]
}

// Backups returns up to n members that follow partition's owner, in consistent's
// GetClosestNForPartition order (members sorted by the xxhash of their name, starting after
// the owner and wrapping). They are distinct and never the owner; fewer than n when the ring
// has fewer than n+1 members. All partitions of one owner share the same backups.
func (r *Ring) Backups(partition uint16, n int) []string {
	owner := r.Owner(partition)
	if owner == "" || n <= 0 {
		return nil
	}
	n = min(n, len(r.byHash)-1)
	out := make([]string, 0, n)
	i := r.hashPos[owner]
	for len(out) < n {
		i = (i + 1) % len(r.byHash)
		out = append(out, r.byHash[i])
	}
	return out
}

// Partitions returns the partitions member owns, sorted; nil for a non-member or a member
// that owns none (possible only with more members than partitions).
func (r *Ring) Partitions(member string) []uint16 {
	if r == nil {
		return nil
	}
	return slices.Clone(r.parts[member])
}

// Assignment returns the owner of every partition, indexed by partition.
func (r *Ring) Assignment() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.owners)
}

// Move is one partition changing owner between two rings. From is "" when the old ring had
// no members, To is "" when the new ring has none.
type Move struct {
	Partition uint16
	From, To  string
}

// Diff returns the partitions whose owner differs between old and new, sorted by partition.
// A nil ring counts as one with no members. Diff panics if both rings are non-nil and have
// different partition counts: the count is part of the data format.
func Diff(old, new *Ring) []Move {
	n := 0
	switch {
	case old != nil && new != nil:
		if old.count != new.count {
			panic(fmt.Sprintf("ring: Diff of rings with %d and %d partitions", old.count, new.count))
		}
		n = old.count
	case old != nil:
		n = old.count
	case new != nil:
		n = new.count
	}
	var moves []Move
	for p := 0; p < n; p++ {
		from, to := old.Owner(uint16(p)), new.Owner(uint16(p))
		if from != to {
			moves = append(moves, Move{Partition: uint16(p), From: from, To: to})
		}
	}
	return moves
}
