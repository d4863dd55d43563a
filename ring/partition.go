// Package ring maps hosts to partitions and partitions to owners.
//
// Duties:
//   - PartitionOf: host key -> site key (SiteKey) -> partition, a pure function fixed for
//     the life of a crawl.
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

import (
	"strings"

	"github.com/cespare/xxhash/v2"
)

// PartitionCount is the fixed number of partitions. Changing it changes every key prefix in
// a node's data directory, so it is part of the data format.
const PartitionCount = 271

// PartitionOf returns the partition of a host key (lower-case host, plus :port when the port
// is not the scheme's default): the hash of its SiteKey.
func PartitionOf(hostKey string) uint16 {
	return uint16(xxhash.Sum64String(SiteKey(hostKey)) % PartitionCount)
}

// SiteLabels is how many trailing labels of a host name make its site key.
const SiteLabels = 3

// SiteKey is what a host is partitioned by: the host key with every label beyond the last
// SiteLabels (3) cut off the front, port kept; IP literals and shorter names are their own
// key. So www.example.org and example.org are separate sites (each fetched under its own
// politeness), while x.y.example.org falls in y.example.org's partition and
// anything.h7.sim.test in h7.sim.test's.
//
// Why: a host's defenses against subdomain traps (a page that links to ever new invented
// subdomains below its host, counted against a budget of its parent) need the parent and
// its children on one node; with a partition per full host name, each invented
// subdomain would land on any node and escape the budget. Three labels keep the common
// sub-sites (blog.example.org, user.github.io) apart for load spreading; deeper names are
// almost always one operator's. (A public-suffix-aware cut would colocate whole
// registrable domains, which puts every host of a platform's domain on one node.)
func SiteKey(hostKey string) string {
	h, port := hostKey, ""
	if strings.HasPrefix(h, "[") {
		return hostKey // IPv6 literal
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h, port = h[:i], h[i:]
	}
	if strings.Count(h, ".") < SiteLabels {
		return hostKey
	}
	if last := h[strings.LastIndexByte(h, '.')+1:]; last != "" && last[0] >= '0' && last[0] <= '9' {
		return hostKey // IPv4 literal
	}
	cut := len(h)
	for k := 0; k < SiteLabels; k++ {
		cut = strings.LastIndexByte(h[:cut], '.')
	}
	return h[cut+1:] + port
}
