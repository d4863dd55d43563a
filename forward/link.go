package forward

import (
	"math"

	"github.com/crawlnode/crawlnode/ring"
	"github.com/crawlnode/crawlnode/urlnorm"
)

// Link is a discovered URL shipped to the node that owns its host: the fields of a
// frontier.Candidate the owner needs (the node converts; this package does not import
// frontier, so that it builds and tests on its own).
//
// Candidate.From (the page the link was found on) is not shipped: the owner uses it for
// nothing but logs, and it would roughly double the bytes per link (a second URL that does
// not front-code against the sorted link URLs). Host is not shipped either: the owner
// derives it from the URL.
type Link struct {
	URL      string // canonical absolute URL (docs/CANONICAL_URLS.md)
	Depth    uint16 // link depth from the seed
	Hops     uint16 // off-site hops
	Priority uint8  // 0 = highest
	// Cash is the OPIC cash the link passes on (frontier.Candidate.Cash), so importance
	// accumulates at the owner whichever node found the link. float32 on the wire.
	Cash float32
}

// Clamp16 converts a frontier depth or hop count (int) to a Link field, clamping it to
// 0..65535.
func Clamp16(v int) uint16 {
	return uint16(max(0, min(v, math.MaxUint16)))
}

// PartitionOfURL returns the partition of a canonical URL's host key; ok is false when the
// URL has no host key.
func PartitionOfURL(u string) (uint16, bool) {
	hk := urlnorm.HostKey(u)
	if hk == "" {
		return 0, false
	}
	return ring.PartitionOf(hk), true
}
