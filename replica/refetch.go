package replica

import (
	"context"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/internal/keyspace"
)

// Shipped tells which of a node's WARC captures reached the output store: the bytes of
// each of its WARC files that the store holds (its manifest's entries, by file name). A
// capture whose record lies beyond that, or in a file the store lacks, is lost with the
// node. An error (the store unreachable) makes a promotion wait and try again: a copy is
// never imported without knowing what to refetch.
type Shipped func(ctx context.Context, node string) (map[string]int64, error)

// shippedCache holds each lost node's shipped files for one promotion pass (a node that
// is gone ships nothing more, so one read of its manifest serves all its partitions).
type shippedCache map[string]map[string]int64

// importOptions are a promotion's import options for p's copy from source: every URL the
// copy has queued or waiting is marked a refetch (the lost node may have fetched it after
// its last replicated round, and its capture is gone), and, with an output store, every
// URL the copy records as fetched by source whose record is not in the store is queued
// again as a refetch.
func (r *Replicator) importOptions(ctx context.Context, p uint16, source string, cache shippedCache) (frontier.ImportOptions, error) {
	o := frontier.ImportOptions{MarkQueued: true}
	if r.shipped == nil {
		return o, nil
	}
	files, ok := cache[source]
	if !ok {
		var err error
		if files, err = r.shipped(ctx, source); err != nil {
			return o, err
		}
		cache[source] = files
	}
	o.Refetch = func(h [16]byte, seen *frontier.SeenRecord) (bool, error) {
		if seen == nil { // a revisit's r record: its seen record is in the copy too
			s, found, err := r.copySeen(p, h)
			if err != nil || !found {
				return false, err
			}
			seen = &s
		}
		return seen.State == frontier.StateFetched && captureLost(source, files, seen.Meta), nil
	}
	return o, nil
}

// captureLost says whether the capture a seen record names (its Meta: the WARC location
// the fetching node wrote) was made by source and is not in the store. A record without
// a location archived nothing; a capture another node made is that node's to ship.
func captureLost(source string, files map[string]int64, meta []byte) bool {
	var loc archive.Location
	if len(meta) == 0 || loc.UnmarshalBinary(meta) != nil {
		return false
	}
	if node, ok := archive.FileNode(loc.File); !ok || node != source {
		return false
	}
	size, ok := files[loc.File]
	return !ok || loc.Offset+loc.Length > size
}

// copySeen reads the seen record of URL hash h in p's copy.
func (r *Replicator) copySeen(p uint16, h [16]byte) (frontier.SeenRecord, bool, error) {
	k := append([]byte{keyspace.FrontierSeen, byte(p >> 8), byte(p)}, h[:]...)
	var s frontier.SeenRecord
	err := r.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(replicaKey(p, k))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			var derr error
			s, derr = frontier.DecodeSeenRecord(v)
			return derr
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return s, false, nil
	}
	return s, err == nil, err
}
