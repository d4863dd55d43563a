// Package ring maps hosts to partitions and partitions to owners.
//
// Duties:
//   - PartitionOf: host key -> partition, a pure function fixed for the life of a crawl.
//     The partition count is a prime (271) so that hosts spread evenly whatever their
//     naming pattern. The hash is xxhash64, the hasher the consistent ring is built with,
//     so PartitionOf(host) equals the ring's own partition for that key.
//   - New: member names -> Ring, the owner of every partition, with buraksezer/consistent
//     (bounded loads). Owner, OwnerOfHost, Partitions, Assignment and Backups read it.
//   - Diff: the partitions whose owner changed between two rings (the handoff plan).
//
// Everything here is pure: no network, no disk, no clock, no goroutines. A Ring is
// immutable and safe for concurrent use.
//
// Decisions where the design is silent:
//   - Determinism: the member list is a set (order, duplicates and empty names do not
//     matter). Members are inserted into consistent sorted, because consistent's circle
//     depends on insertion order when virtual-node keys collide ("n1"+"10" = "n11"+"0").
//     Every node computing the ring from the same set gets the same owners.
//   - Load bound: a member owns at most Capacity = floor(Load x partitions / members), so
//     max/mean <= Load. consistent's own bound, ceil(floor(partitions/members) x Load), is
//     0 beyond 271 members (it panics) and is sometimes looser; we pass consistent the Load
//     that yields our Capacity. Capacity is raised to floor(partitions/members)+1 whenever
//     it is smaller so that the partitions always fit (from about 91 members on, where
//     rounding dominates: 100 members -> 3, 200 -> 2).
//   - More members than partitions (or ReplicationFactor 1, where consistent's spill-over
//     walk can miss the one member with room): placeBounded, the same algorithm step for
//     step with Capacity 1, places the partitions; the surplus members own nothing. A test
//     holds placeBounded to consistent wherever consistent can run.
//   - Backups follow consistent.GetClosestNForPartition: members ordered by xxhash(name),
//     the n after the owner. So all of one owner's partitions share the same backups.
//   - Movement: bounded loads are not minimal-movement. When a member joins or leaves, the
//     capacity changes and spill-over chains shift, so besides the partitions that must
//     move, a few move between unchanged members (0-7 for 2-21 members in the tests), and
//     many more where the capacity falls to a tight fit (n x Capacity just over 271):
//     measured 68 moves for 90 -> 91 members, 90 for 135 -> 136, 116 for 271 -> 272, while
//     the joining member gains 1-3. Callers should take the Diff as the plan, not assume
//     that only the joining or leaving member's partitions move.
//   - Config: zero fields take defaults; New panics on a config Validate rejects (a
//     programming error, checked where configs are read). Owner of an out-of-range
//     partition, and every owner of an empty or nil ring, is "".
package ring

import "github.com/cespare/xxhash/v2"

// PartitionCount is the fixed number of partitions. Changing it changes every key prefix in
// a node's data directory, so it is part of the data format.
const PartitionCount = 271

// PartitionOf returns the partition of a host key (lower-case host, plus :port when the port
// is not the scheme's default).
func PartitionOf(hostKey string) uint16 {
	return uint16(xxhash.Sum64String(hostKey) % PartitionCount)
}
