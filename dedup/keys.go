package dedup

import (
	"encoding/binary"
	"math/bits"

	"github.com/crawlnode/crawlnode/internal/keyspace"
	"github.com/crawlnode/crawlnode/ring"
)

// Key layout (family keyspace.DedupKeys, 'D'), partition first like the frontier's keys so
// that a partition's decisions stream, merge and drop with it:
//
//	D|part(2)|'c'|sha256(32)                     -> ref of the first page with that text
//	D|part(2)|'n'|table(1)|block(2)|simhash(8)   -> hash8(8) | ref ("\n" ref)* of an original's fingerprint
//
// ref is "<url>\t<fetch time ns>" (corpus's record key); hash8 is the first 8 bytes of the
// page's exact hash, so a near probe can tell an exact copy (decided by the exact key) from a
// near one. A near entry names one page, or more while exact copies of it are being decided
// (they share the entry; see "Exact copies share a near entry" in doc.go); a URL holds no
// control character, so "\n" never occurs in a ref (a near operation whose ref holds one is
// refused, ErrBadOp).
const (
	kindExact = 'c'
	kindNear  = 'n'
)

// Tables is the number of 16-bit blocks (and near-index tables) of a 64-bit fingerprint;
// MaxDistance the largest Hamming distance at which two fingerprints are near duplicates.
// They match corpus.NearTables and corpus.NearMaxDistance.
const (
	Tables      = 4
	MaxDistance = 3
)

func block(h uint64, table int) uint16 { return uint16(h >> (16 * uint(table))) }

// ExactPartition is the partition that decides an exact hash: its first four bytes modulo
// the partition count (the hash is uniform already).
func ExactPartition(hash []byte) uint16 {
	return uint16(binary.BigEndian.Uint32(hash[:4]) % ring.PartitionCount)
}

// NearPartition is the partition that decides block b of table t: the pair mixed
// (splitmix64's finalizer) modulo the partition count, so the 4 x 65536 buckets spread
// evenly and a fingerprint's four buckets usually sit on different partitions.
func NearPartition(table int, b uint16) uint16 {
	x := uint64(table)<<16 | uint64(b)
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return uint16(x % ring.PartitionCount)
}

func exactKey(part uint16, hash []byte) []byte {
	k := make([]byte, 0, 4+len(hash))
	k = append(k, keyspace.DedupKeys, byte(part>>8), byte(part), kindExact)
	return append(k, hash...)
}

// nearPrefix is the bucket of (table, block): every fingerprint stored with that block.
func nearPrefix(part uint16, table int, b uint16) []byte {
	return []byte{keyspace.DedupKeys, byte(part >> 8), byte(part), kindNear, byte(table), byte(b >> 8), byte(b)}
}

func nearKey(part uint16, table int, h uint64) []byte {
	return binary.BigEndian.AppendUint64(nearPrefix(part, table, block(h, table)), h)
}

// lowestShared is the lowest table in which a and b have the same block (Tables if none).
// The near decision between two fingerprints is made in that table's bucket only: both are
// there, on one owner, so one of them is first.
func lowestShared(a, b uint64) int {
	for t := 0; t < Tables; t++ {
		if block(a, t) == block(b, t) {
			return t
		}
	}
	return Tables
}

func hamming(a, b uint64) int { return bits.OnesCount64(a ^ b) }

func hash8(hash []byte) uint64 {
	if len(hash) < 8 {
		var b [8]byte
		copy(b[:], hash)
		return binary.BigEndian.Uint64(b[:])
	}
	return binary.BigEndian.Uint64(hash[:8])
}
