package replica

import (
	"github.com/crawlnode/crawlnode/internal/httpjson"

	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/forward"
	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/internal/wire"
)

// Receive applies a replica stream (the backup's side).
func (r *Replicator) Receive(w http.ResponseWriter, req *http.Request) {
	zr, err := zstd.NewReader(req.Body, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_stream", "%v", err)
		return
	}
	defer zr.Close()
	caller, _ := clusterauth.PeerFrom(req.Context())
	ans, err := r.apply(bufio.NewReaderSize(zr, 64<<10), caller)
	if errors.Is(err, errNotSender) {
		writeError(w, http.StatusForbidden, "forbidden", "replica: %v", err)
		return
	}
	if err != nil {
		// What was applied before the error stays (each partition's meta moves only at
		// its end); the sender resends from its last acknowledged version.
		writeError(w, http.StatusBadRequest, "bad_stream", "replica: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// maxReplicaField bounds a key or value in a replica stream (frontier records are small;
// a host meta blob holds a robots.txt of at most 500 KiB).
const maxReplicaField = 4 << 20

// apply applies a replica stream: decode each section's head, decide what to do with
// it against the copy here, write its records (or only read them past), and answer
// the versions now held and the partitions wanted in full.
func (r *Replicator) apply(br *bufio.Reader, caller string) (answer, error) {
	ans := answer{Applied: map[uint16]uint64{}}
	source, err := readStreamHead(br)
	if err != nil {
		return ans, err
	}
	if caller == "" || source != caller {
		// A member sends its own partitions only: the stream's source is its caller.
		return ans, fmt.Errorf("%w: stream of %q sent by %q", errNotSender, source, caller)
	}
	// One write batch for the whole stream, flushed at its end: a batch (and a commit
	// to wait for) per partition, and a Badger read of its meta, were most of the apply's
	// own cost with a hundred-odd small sections a request. On an error nothing of the
	// batch is acknowledged; what it committed already (a large batch commits as it
	// grows) is applied again by the resent delta (sets and deletions are idempotent).
	wb := r.db.NewWriteBatch()
	type done struct {
		p, slot uint16 // the partition as sent, where its copy is kept
		meta    copyMeta
	}
	var applied []done
	fail := func(err error) (answer, error) {
		wb.Cancel()
		return answer{}, err
	}
	var dec recordDecoder
	for {
		p, since, end, err := readSectionHead(br)
		if err != nil {
			return fail(err)
		}
		if end {
			break
		}
		slot, v := r.decideSection(source, p, since)
		if v == replace {
			// A full copy: what was here of p goes first.
			if err := r.clear(slot); err != nil {
				return fail(err)
			}
			if err := wb.Set(replicaMetaKey(slot), mustJSON(copyMeta{Source: source})); err != nil {
				return fail(err)
			}
		}
		version, err := dec.section(br, p, func(k, val []byte, deleted bool) error {
			switch {
			case v == refuse:
				return nil
			case deleted:
				return wb.Delete(replicaKey(slot, k))
			default:
				return wb.Set(replicaKey(slot, k), slices.Clone(val))
			}
		})
		if err != nil {
			return fail(err)
		}
		if v == refuse {
			ans.Resync = append(ans.Resync, p)
			continue
		}
		m := copyMeta{Source: source, Version: version, At: r.now()}
		if err := wb.Set(replicaMetaKey(slot), mustJSON(m)); err != nil {
			return fail(err)
		}
		applied = append(applied, done{p, slot, m})
	}
	if err := wb.Flush(); err != nil {
		return answer{}, err
	}
	for _, d := range applied {
		r.noteCopy(d.slot, &d.meta)
		ans.Applied[d.p] = d.meta.Version
	}
	return ans, nil
}

// verdict is what a backup does with one section of a stream (decide).
type verdict int

const (
	refuse  verdict = iota // read the records past, write none, ask for a full copy
	replace                // a full copy: what is here of the slot goes first
	extend                 // a delta that starts where the copy here ends
)

// decide is what a backup does with a section from source starting at version since
// (0: a full copy), given whether the section has a slot here (an outbox copy may not)
// and the meta of the copy in it (has: there is one). Only a delta that starts where
// the copy ends, from the same source, extends it; any other delta is refused and the
// sender asked for a full copy (a reset).
func decide(source string, since uint64, slotted bool, m copyMeta, has bool) verdict {
	switch {
	case !slotted:
		return refuse
	case since == 0:
		return replace
	case !has || m.Source != source || m.Version != since:
		return refuse
	}
	return extend
}

// decideSection finds where p's copy from source is kept here (slot: p itself, or for
// an outbox the source's own slot) and decides on its section.
func (r *Replicator) decideSection(source string, p uint16, since uint64) (uint16, verdict) {
	slot, slotted := p, true
	if p == outboxSlot {
		// No slot: a delta without a copy here (asked for a full one), or a full copy
		// with every slot taken (refused, the partitions still apply).
		if slot, slotted = r.outboxSlotFor(source, since == 0); !slotted && since == 0 {
			r.log.Warn("replica: no room for another outbox copy; refused", "source", source, "kept", maxOutboxCopies)
		}
	}
	if p != outboxSlot && r.cluster != nil { // no cluster: a replicator under unit test
		// Only the partition's lease holder (as this node last heard the table) copies
		// it here: anything else is read past, unwritten, and asked again in full (the
		// table may only lag here; the holder's next round then lands).
		if owner, _ := r.cluster.OwnerOf(p); owner != source {
			return slot, refuse
		}
	}
	m, has := r.meta(slot)
	return slot, decide(source, since, slotted, m, has)
}

// errNotSender: a replica stream named a source other than its authenticated caller.
var errNotSender = errors.New("not the stream's source")

// readStreamHead reads a stream's magic and its sender's name.
func readStreamHead(br *bufio.Reader) (source string, err error) {
	magic := make([]byte, len(streamMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != streamMagic {
		return "", fmt.Errorf("not a replica stream")
	}
	src, err := wire.ReadBytes(br, nil, maxReplicaField)
	if err != nil {
		return "", err
	}
	return string(src), nil
}

// readSectionHead reads a section's tag, partition (or outboxSlot) and the version it
// starts from; end is true at the stream's end mark.
func readSectionHead(br *bufio.Reader) (p uint16, since uint64, end bool, err error) {
	tag, err := br.ReadByte()
	if err != nil {
		return 0, 0, false, err
	}
	if tag == 'E' {
		return 0, 0, true, nil
	}
	if tag != 'P' {
		return 0, 0, false, fmt.Errorf("bad section tag %q", tag)
	}
	pv, err := binary.ReadUvarint(br)
	if err != nil {
		return 0, 0, false, err
	}
	if pv > outboxSlot {
		return 0, 0, false, fmt.Errorf("partition %d out of range", pv)
	}
	since, err = binary.ReadUvarint(br)
	return uint16(pv), since, false, err
}

// recordDecoder reads sections' records, reusing its buffers.
type recordDecoder struct {
	kbuf, vbuf []byte
}

// section reads the records of p's section up to its end mark, checks that each key
// belongs to p, hands each to put (key and value valid during the call; deleted: a
// deletion, value nil) and returns the version the section ends at.
func (d *recordDecoder) section(br *bufio.Reader, p uint16, put func(key, value []byte, deleted bool) error) (uint64, error) {
	for {
		op, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if op == 0 {
			break
		}
		if d.kbuf, err = wire.ReadBytes(br, d.kbuf, maxReplicaField); err != nil {
			return 0, err
		}
		k := d.kbuf
		if len(k) < 3 || (p == outboxSlot) != (k[0] == forward.KeyPrefix) || (p != outboxSlot && binary.BigEndian.Uint16(k[1:3]) != p) {
			return 0, fmt.Errorf("key of another partition in partition %d", p)
		}
		switch op {
		case 1:
			if d.vbuf, err = wire.ReadBytes(br, d.vbuf, maxReplicaField); err != nil {
				return 0, err
			}
			err = put(k, d.vbuf, false)
		case 2:
			err = put(k, nil, true)
		default:
			return 0, fmt.Errorf("bad record op %d", op)
		}
		if err != nil {
			return 0, err
		}
	}
	return binary.ReadUvarint(br)
}

// meta returns p's replica meta (as apply and clear keep it in memory, in step with
// Badger's); ok is false when there is none.
func (r *Replicator) meta(p uint16) (copyMeta, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copiesLocked()
	m, ok := r.metas[p]
	return m, ok
}

// clear deletes p's copy (meta included).
func (r *Replicator) clear(p uint16) error {
	db := r.db
	wb := db.NewWriteBatch()
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: replicaPrefix(p)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		wb.Cancel()
		return err
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	r.noteCopy(p, nil)
	return nil
}

// held lists the partitions this node keeps a copy of, with their metas.
func (r *Replicator) held() map[uint16]copyMeta {
	out := map[uint16]copyMeta{}
	_ = r.db.View(func(txn *badger.Txn) error {
		for p := range uint16(outboxSlot + maxOutboxCopies) {
			it, err := txn.Get(replicaMetaKey(p))
			if err != nil {
				continue
			}
			var m copyMeta
			if it.Value(func(v []byte) error { return json.Unmarshal(v, &m) }) == nil {
				out[p] = m
			}
		}
		return nil
	})
	return out
}

// copiesLocked returns the copies map, loading it (and metas) on first use; callers
// hold mu.
func (r *Replicator) copiesLocked() map[uint16]string {
	if !r.copiesInit {
		r.copies = map[uint16]string{}
		r.metas = map[uint16]copyMeta{}
		r.outboxes = map[string]uint16{}
		for p, m := range r.held() {
			r.copies[p] = m.Source
			r.metas[p] = m
			if isOutboxSlot(p) {
				r.outboxes[m.Source] = p
			}
		}
		r.copiesInit = true
	}
	return r.copies
}

// noteCopy records p's copy meta as apply committed it (nil: clear deleted the copy).
func (r *Replicator) noteCopy(p uint16, m *copyMeta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.copiesLocked()
	if m == nil {
		delete(c, p)
		delete(r.metas, p)
	} else {
		c[p] = m.Source
		r.metas[p] = *m
	}
}

// Blocked lists the partitions whose copy from a source that is not alive waits to be
// imported: this node must not fetch them before (it would fetch again what the copy
// says the lost node fetched).
func (r *Replicator) Blocked() map[uint16]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	copies := r.copiesLocked()
	if len(copies) == 0 {
		return nil
	}
	alive := r.cluster.Alive()
	out := map[uint16]bool{}
	for p, src := range copies {
		if isOutboxSlot(p) {
			continue
		}
		if _, ok := alive[src]; !ok {
			out[p] = true
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpjson.Write(w, status, v) }

func writeError(w http.ResponseWriter, status int, code, format string, a ...any) {
	httpjson.WriteError(w, status, code, format, a...)
}
