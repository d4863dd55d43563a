package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Importing a partition (ImportPartition): the merge of another node's export into this
// frontier, one chunk at a time: decode, decide (pure), write.

// ImportStats says what ImportPartition did with the records it read.
type ImportStats struct {
	Records      int // records read
	Queued       int // q records added to a local queue
	Retries      int // r records added to the local retry set
	QueueKept    int // q/r records not added: the URL was already queued, waiting or final here
	SeenNew      int // s records written where this node had none
	SeenUpdated  int // local s records replaced by a more advanced (or later final) one
	SeenKept     int // local s records kept (as advanced or later)
	Unqueued     int // local queued URLs removed because the import says they are final
	Orphans      int // "queued" s records that came without their q/r record: not marked seen
	Dead         int // dead letters added
	DeadKept     int // dead letters already here
	Hosts        int // host records merged
	HostMeta     int // host meta blobs adopted (this node had none)
	HostMetaKept int // host meta blobs kept (this node had one)
	DedupNew     int // duplicate keys (family D) added
	DedupKept    int // duplicate keys already here: the local value stays (first writer wins)
	Chunks       int // write batches committed
	// Refetch (ImportOptions): fetched URLs queued again, and those that could not be
	// (their host maps to another partition here).
	Refetch, NotRefetched int
}

// importChunkRecords and importChunkBytes bound what one import step holds in memory and
// holds addMu for.
const (
	importChunkRecords = 4096
	importChunkBytes   = 8 << 20
)

type rawRec struct {
	fam  byte
	k, v []byte
}

// ImportPartition merges a stream of partition p's records (as written by ExportPartition
// on another node) into this frontier. next returns the records and io.EOF at the end;
// any other error aborts the import and is returned (wrapped), after the records read so
// far are applied: the merge is idempotent, so the sender simply retries the whole
// stream. A truncated or corrupt stream must therefore surface as an error from next,
// never as io.EOF (snapshot.Reader does that).
//
// Merge rules (idempotent: importing the same stream twice changes nothing the second time):
//   - q and r records: added only if this node has no seen record for the URL. Every
//     writer of a "queued" seen record writes the URL's q or r key in the same
//     transaction, so a seen record means the URL is queued, waiting, leased or final
//     here, and a URL is never queued twice. Imported entries get fresh local sequence
//     numbers (keeping their priority, depth and relative order), so they cannot collide
//     with local keys.
//   - s records: union; when both sides have one, the more advanced state wins
//     (fetched/dropped/dead beat queued) and of two finals the later At. A final record
//     that beats a local "queued" one also removes the URL from the local queue or retry
//     set (found in an index of p's local q/r keys, built when first needed; a URL that
//     Add queues after that stays queued and may be fetched once more, never lost). A "queued" record whose URL has no
//     local record is not written (an orphan without its q/r record would be a URL marked
//     seen that no queue holds).
//   - d records: union (a local dead letter is kept).
//   - h records: the more cautious politeness: the later next-allowed time, the longer
//     delay when both sides set one (else the one that is set), the larger admitted and
//     generated counters. The host meta blob (robots.txt) is kept if present, else adopted.
//
// The import pauses p while it runs and refuses (ErrPartitionBusy) while p has leases in
// flight here. It works in chunks of at most importChunkRecords records; each chunk holds
// addMu (Adds wait) while it reads the local state and commits. After each chunk the
// in-memory state (host structs, counters, Bloom filter, prefetch buffers) includes the
// chunk, so Next and Add see imported data at once when p is not paused by the caller.
func (f *Frontier) ImportPartition(p uint16, next func() (family byte, key, value []byte, err error)) (ImportStats, error) {
	return f.ImportPartitionWith(p, next, ImportOptions{})
}

// ImportOptions change what ImportPartitionWith does with a lost node's records.
type ImportOptions struct {
	// Refetch, when set, is asked about every URL the stream records as fetched: its
	// hash and, for a seen record, the record (nil for a revisit's r record, which comes
	// before its seen record; the caller looks the record up). True: the capture may not
	// have reached the output store, so the URL is queued again as a discovery URL
	// (qrec.Refetch set, no validators: a full fetch, never a conditional one), at the
	// deepest admitted depth (its links were admitted with the first fetch; none beyond
	// the depth limit is admitted now), instead of being recorded as fetched. A URL whose
	// host does not map to the partition here keeps its record (counted NotRefetched).
	Refetch func(h [16]byte, seen *SeenRecord) (bool, error)
	// MarkQueued marks every URL the stream has queued or waiting (not a revisit) as a
	// refetch too: a lost node may have fetched it after its last replicated round.
	MarkQueued bool
}

// ImportPartitionWith is ImportPartition with options (a promotion's refetches).
func (f *Frontier) ImportPartitionWith(p uint16, next func() (family byte, key, value []byte, err error), o ImportOptions) (ImportStats, error) {
	var st ImportStats
	f.partitionOpMu.Lock()
	defer f.partitionOpMu.Unlock()
	err := f.beginPartitionOp(p)
	defer f.endPartitionOp(p)
	if err != nil {
		return st, fmt.Errorf("frontier: import partition %d: %w", p, err)
	}
	im := &importer{f: f, p: p, st: &st, newHosts: map[string]bool{}, opts: o}
	defer im.fixChildren()
	var chunk []rawRec
	size := 0
	for {
		fam, k, v, rerr := next()
		if rerr == nil {
			st.Records++
			chunk = append(chunk, rawRec{fam, slices.Clone(k), slices.Clone(v)})
			size += len(k) + len(v)
			if len(chunk) < importChunkRecords && size < importChunkBytes {
				continue
			}
		}
		if len(chunk) > 0 {
			if err := im.apply(chunk); err != nil {
				return st, fmt.Errorf("frontier: import partition %d: %w", p, err)
			}
			st.Chunks++
			chunk, size = chunk[:0], 0
		}
		if rerr == io.EOF { //nolint:errorlint // only the bare io.EOF ends a stream; a wrapped one is a failure
			return st, nil
		}
		if rerr != nil {
			return st, fmt.Errorf("frontier: import partition %d: stream: %w", p, rerr)
		}
	}
}

// importer is the state of one ImportPartition.
type importer struct {
	f  *Frontier
	p  uint16
	st *ImportStats
	// local maps the URL hash of every q/r key of p that existed when first needed (a
	// final import record beat a local "queued" one) to that key; built lazily, updated
	// with what the import adds. Memory: one entry per locally queued URL of p, usually
	// few on a receiver that did not own p.
	local    map[[16]byte]localRef
	newHosts map[string]bool
	opts     ImportOptions
}

type localRef struct {
	key   []byte
	host  string
	retry bool
}

// revisit says the key schedules a fetched URL's next visit (an r key with the revisit
// bit, or a q key in the revisit band): its seen record is final by design, so a final
// seen record does not unqueue it.
func (r localRef) revisit() bool {
	if r.retry {
		_, _, seq, _ := parseRKey(r.key)
		return seq&revisitBit != 0
	}
	return prioOfKey(r.key) == bandRevisit
}

// impRec is one import record, decoded and checked against the partition (decodeImport).
type impRec struct {
	fam      byte
	key, val []byte // as sent
	host     string // q, r: the host of the queue key; h: the host
	meta     bool   // h: the host's opaque meta blob, not its state
	hash     [16]byte
	qk       []byte // q, r: the queue key as sent
	rec      qrec   // q, r
	due      int64  // r
	rseq     uint64 // r: its sequence, with the revisit bit
	seen     SeenRecord
	hostRec  hostRec
}

// decodeImport decodes and checks one record of partition p: its family and partition,
// its value, and that every host it names maps to p here (ErrForeignKey otherwise). It
// reads no local state.
func decodeImport(r rawRec, p uint16, partitionOf func(string) uint16) (impRec, error) {
	d := impRec{fam: r.fam, key: r.k, val: r.v}
	if len(r.k) < 3 || r.k[0] != r.fam {
		return d, fmt.Errorf("%w: key of family %q does not start with it", ErrCorrupt, r.fam)
	}
	if binary.BigEndian.Uint16(r.k[1:3]) != p {
		return d, fmt.Errorf("%w: key of partition %d", ErrForeignKey, binary.BigEndian.Uint16(r.k[1:3]))
	}
	var err error
	switch r.fam {
	case famQueue, famRetry:
		if r.fam == famQueue {
			d.qk = r.k
			d.rec, err = decodeQrec(r.v)
		} else {
			var ok bool
			if _, d.due, d.rseq, ok = parseRKey(r.k); !ok {
				return d, fmt.Errorf("%w: retry key", ErrCorrupt)
			}
			d.qk, d.rec, err = decodeR(r.v)
		}
		if err != nil {
			return d, err
		}
		hn, _, ok := parseQKey(d.qk)
		if !ok || binary.BigEndian.Uint16(d.qk[1:3]) != p {
			return d, fmt.Errorf("%w: queue key", ErrCorrupt)
		}
		if partitionOf(hn) != p {
			return d, fmt.Errorf("%w: host %q maps to partition %d here", ErrForeignKey, hn, partitionOf(hn))
		}
		d.host, d.hash = hn, URLHash(d.rec.URL)
	case famSeen:
		if len(r.k) != 19 {
			return d, fmt.Errorf("%w: seen key", ErrCorrupt)
		}
		copy(d.hash[:], r.k[3:])
		d.seen, err = decodeSeen(r.v)
		return d, err
	case famDead:
		if len(r.k) != 19 {
			return d, fmt.Errorf("%w: dead key", ErrCorrupt)
		}
		copy(d.hash[:], r.k[3:])
		_, err = decodeDead(r.v)
		return d, err
	case famHost:
		return decodeImportHost(d, p, partitionOf)
	case famDedup:
		if len(r.k) < 4 {
			return d, fmt.Errorf("%w: dedup key", ErrCorrupt)
		}
	default:
		return d, fmt.Errorf("%w: unknown family %q", ErrCorrupt, r.fam)
	}
	return d, nil
}

// decodeImportHost is decodeImport for an h record: a host's state or its meta blob.
func decodeImportHost(d impRec, p uint16, partitionOf func(string) uint16) (impRec, error) {
	rest := d.key[3:]
	if i := bytes.IndexByte(rest, 0); i >= 0 {
		if !bytes.Equal(rest[i:], []byte{0, 'm'}) || i == 0 {
			return d, fmt.Errorf("%w: host key", ErrCorrupt)
		}
		rest, d.meta = rest[:i], true
	} else if len(rest) == 0 {
		return d, fmt.Errorf("%w: host key", ErrCorrupt)
	}
	d.host = string(rest)
	if partitionOf(d.host) != p {
		return d, fmt.Errorf("%w: host %q", ErrForeignKey, rest)
	}
	if d.meta {
		return d, nil
	}
	var err error
	d.hostRec, err = decodeHost(d.val)
	return d, err
}

// localFacts is what this node holds that decideImport weighs a record against.
type localFacts struct {
	seen   SeenRecord // q, r, s: the URL's seen record here (or written earlier in the chunk)
	seenOK bool       // ... and whether there is one
	exists bool       // d, h meta: the key is here (meta: or earlier in the chunk)
}

// verdict is what an import does with one record (the merge rules of ImportPartition).
type verdict int

const (
	queueKept   verdict = iota // q, r: the URL has a seen record here: it is queued, leased or final here
	queueAdd                   // q, r: queued here under a local sequence, marked seen "queued"
	seenOrphan                 // s: "queued" without a local record: not written (no queue holds it)
	seenNew                    // s: a record this node lacks
	seenKept                   // s: the local record wins (seenWins)
	seenUpdate                 // s: the imported record wins
	seenUnqueue                // s: a final imported record beats a local "queued" one: it also leaves the local queue
	deadKept                   // d: a local dead letter is kept
	deadNew                    // d: a dead letter this node lacks
	metaKept                   // h meta: a local blob is kept
	metaNew                    // h meta: adopted
	hostMerge                  // h: merged with the local state, the more cautious (mergeHost)
	dedupKept                  // D: a local duplicate key is kept (first writer wins)
	dedupNew                   // D: a duplicate key this node lacks
)

// decideImport applies the merge rules to one decoded record and what this node holds.
// It is pure: the caller reads the local facts and carries the verdict out.
func decideImport(r *impRec, l localFacts) verdict {
	switch r.fam {
	case famQueue, famRetry:
		if l.seenOK {
			return queueKept
		}
		return queueAdd
	case famSeen:
		switch {
		case !l.seenOK && r.seen.State == StateQueued:
			return seenOrphan
		case !l.seenOK:
			return seenNew
		case !seenWins(l.seen, r.seen):
			return seenKept
		case l.seen.State == StateQueued:
			return seenUnqueue
		default:
			return seenUpdate
		}
	case famDead:
		if l.exists {
			return deadKept
		}
		return deadNew
	case famDedup:
		if l.exists {
			return dedupKept
		}
		return dedupNew
	default: // famHost, checked by decodeImport
		if !r.meta {
			return hostMerge
		}
		if l.exists {
			return metaKept
		}
		return metaNew
	}
}

// count adds a verdict to the stats of what was read and decided; what is committed to
// memory (Queued, Retries, Unqueued, Hosts) is counted when it is.
func (st *ImportStats) count(v verdict) {
	switch v {
	case queueKept:
		st.QueueKept++
	case seenOrphan:
		st.Orphans++
	case seenNew:
		st.SeenNew++
	case seenKept:
		st.SeenKept++
	case seenUpdate, seenUnqueue:
		st.SeenUpdated++
	case deadKept:
		st.DeadKept++
	case deadNew:
		st.Dead++
	case metaKept:
		st.HostMetaKept++
	case metaNew:
		st.HostMeta++
	case dedupKept:
		st.DedupKept++
	case dedupNew:
		st.DedupNew++
	}
}

// effect is what one committed write group changes in memory.
type effect struct {
	kind    int
	host    string
	it      item   // effQueue: the new q key and record
	delKey  []byte // effUnqueue: the removed local q or r key
	retry   bool   // effUnqueue: delKey is an r key
	due     int64  // effRetry
	seenNew bool   // a new s key was written (seen+1, Bloom)
	hash    [16]byte
}

const (
	effNone = iota
	effQueue
	effRetry
	effUnqueue
	effDead
)

type seenState struct {
	rec    SeenRecord
	exists bool
}

// importGroup is one atomic write of an import and what it changes in memory.
type importGroup struct {
	ops []op
	eff effect
}

// importPlan is what a chunk writes: its groups, and the host records to merge.
type importPlan struct {
	groups []importGroup
	hosts  []impRec
}

// apply merges one chunk in three steps: decode (decodeImport, no local state), plan
// (read the local facts, decideImport, build the writes) and write (merge the host
// states, commit, update memory). It holds addMu (no Add confirms or writes meanwhile),
// hostRecMu (host records) and retryScanMu (no retry moves) from the local reads to the
// in-memory update.
func (im *importer) apply(chunk []rawRec) error {
	recs := make([]impRec, len(chunk))
	for i, r := range chunk {
		var err error
		if recs[i], err = decodeImport(r, im.p, im.f.cfg.PartitionOf); err != nil {
			return err
		}
		if err := im.refetch(&recs[i]); err != nil {
			return err
		}
	}
	f := im.f
	f.addMu.Lock()
	defer f.addMu.Unlock()
	f.hostRecMu.Lock()
	defer f.hostRecMu.Unlock()
	f.retryScanMu.Lock()
	defer f.retryScanMu.Unlock()

	var plan importPlan
	err := f.db.View(func(txn *badger.Txn) error {
		var err error
		plan, err = im.plan(txn, recs)
		return err
	})
	if err != nil {
		return err
	}
	return im.write(plan)
}

// plan reads, for each record of the chunk, what this node holds of it, decides, and
// builds the writes. Records earlier in the chunk count as local for later ones.
func (im *importer) plan(txn *badger.Txn, recs []impRec) (importPlan, error) {
	var pl importPlan
	metaKeys := make(map[string]bool)    // adopt-if-absent keys written earlier in this chunk
	pend := make(map[[16]byte]seenState) // seen state of URLs written earlier in this chunk
	for i := range recs {
		r := &recs[i]
		l, err := im.facts(txn, r, pend, metaKeys)
		if err != nil {
			return pl, err
		}
		v := decideImport(r, l)
		switch v {
		case queueAdd:
			g := im.queueGroup(r)
			pend[r.hash] = seenState{rec: g.seen, exists: true}
			pl.groups = append(pl.groups, g.importGroup)
		case seenNew, seenUpdate:
			pend[r.hash] = seenState{rec: r.seen, exists: true}
			eff := effect{}
			if v == seenNew {
				eff = effect{seenNew: true, hash: r.hash}
			}
			pl.groups = append(pl.groups, importGroup{ops: []op{{k: r.key, v: r.val}}, eff: eff})
		case seenUnqueue:
			pend[r.hash] = seenState{rec: r.seen, exists: true}
			g, err := im.unqueueGroup(txn, r)
			if err != nil {
				return pl, err
			}
			pl.groups = append(pl.groups, g)
		case deadNew:
			pl.groups = append(pl.groups, importGroup{ops: []op{{k: r.key, v: r.val}}, eff: effect{kind: effDead}})
		case metaNew, dedupNew:
			// Both are "adopt if absent": later records of the chunk with the same key
			// must see this one (metaKeys).
			metaKeys[string(r.key)] = true
			pl.groups = append(pl.groups, importGroup{ops: []op{{k: r.key, v: r.val}}})
		case hostMerge:
			pl.hosts = append(pl.hosts, *r)
		}
		im.st.count(v)
	}
	return pl, nil
}

// facts reads what decideImport needs of this node for r: the URL's seen record (pend
// first: written earlier in the chunk), or whether the dead letter or meta key exists.
func (im *importer) facts(txn *badger.Txn, r *impRec, pend map[[16]byte]seenState, metaKeys map[string]bool) (localFacts, error) {
	var l localFacts
	switch {
	case r.fam == famQueue || r.fam == famRetry || r.fam == famSeen:
		if s, ok := pend[r.hash]; ok {
			l.seen, l.seenOK = s.rec, s.exists
			return l, nil
		}
		it, err := txn.Get(hashKey(famSeen, im.p, r.hash))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return l, nil
		}
		if err != nil {
			return l, err
		}
		l.seenOK = true
		err = it.Value(func(v []byte) error {
			var derr error
			l.seen, derr = decodeSeen(v)
			return derr
		})
		return l, err
	case r.fam == famDead || r.meta || r.fam == famDedup:
		var err error
		if l.exists, err = keyExists(txn, r.key); err != nil {
			return l, err
		}
		if (r.meta || r.fam == famDedup) && metaKeys[string(r.key)] {
			l.exists = true
		}
		return l, nil
	}
	return l, nil
}

// keyExists reports whether txn sees key k.
func keyExists(txn *badger.Txn, k []byte) (bool, error) {
	_, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// queuedGroup is a queueAdd's write group and the seen record it writes.
type queuedGroup struct {
	importGroup
	seen SeenRecord
}

// queueGroup builds a queueAdd: the URL's q key (or r key) under a fresh local sequence,
// keeping its priority and depth, and its "queued" seen record, in one group.
func (im *importer) queueGroup(r *impRec) queuedGroup {
	f := im.f
	nk := binary.BigEndian.AppendUint64(slices.Clone(r.qk[:len(r.qk)-8]), f.seq.Add(1))
	sr := SeenRecord{URL: r.rec.URL, State: StateQueued, At: f.cfg.Now(), QKey: nk}
	g := importGroup{ops: []op{{k: hashKey(famSeen, im.p, r.hash), v: sr.encode()}}}
	g.eff = effect{host: r.host, seenNew: true, hash: r.hash}
	if r.fam == famQueue {
		g.ops = append(g.ops, op{k: nk, v: r.rec.encode()})
		g.eff.kind, g.eff.it = effQueue, item{key: nk, rec: r.rec}
	} else {
		rk := rKey(im.p, r.due, f.seq.Add(1)|r.rseq&revisitBit)
		g.ops = append(g.ops, op{k: rk, v: encodeR(nk, &r.rec)})
		g.eff.kind, g.eff.due, g.eff.delKey = effRetry, r.due, rk
	}
	return queuedGroup{g, sr}
}

// unqueueGroup builds a seenUnqueue: the imported final seen record, and the deletion of
// the URL's local q or r key when it has one that is not a revisit's.
func (im *importer) unqueueGroup(txn *badger.Txn, r *impRec) (importGroup, error) {
	g := importGroup{ops: []op{{k: r.key, v: r.val}}}
	ref, ok, err := im.localRef(txn, r.hash)
	if err != nil || !ok || ref.revisit() {
		return g, err
	}
	present, err := keyExists(txn, ref.key)
	if err != nil || !present {
		return g, err
	}
	g.ops = append(g.ops, op{k: ref.key, del: true})
	g.eff = effect{kind: effUnqueue, host: ref.host, delKey: ref.key, retry: ref.retry}
	delete(im.local, r.hash)
	return g, nil
}

// write carries a plan out: host records merge with the in-memory state (which is newer
// than Badger's: next is not persisted at every lease) and are written as merged; then
// the groups are committed and the committed ones reach the Bloom filter and memory.
func (im *importer) write(pl importPlan) error {
	f := im.f
	f.mu.Lock()
	for _, hr := range pl.hosts {
		h := im.hostLocked(hr.host)
		m := mergeHost(h.rec(), hr.hostRec)
		h.delay, h.delaySet, h.nextAt, h.admitted, h.generated = m.Delay, m.DelaySet, m.Next, m.Admitted, m.Generated
		pl.groups = append(pl.groups, importGroup{ops: []op{{k: hKey(im.p, hr.host), v: m.encode()}}})
		im.st.Hosts++
	}
	for _, g := range pl.groups {
		if g.eff.kind == effQueue {
			im.hostLocked(g.eff.host)
			f.committing[string(g.eff.it.key)] = struct{}{}
		}
	}
	f.mu.Unlock()

	b := newBatch(f.db)
	defer b.discard()
	var err error
	for _, g := range pl.groups {
		if err = b.group(g.ops...); err != nil {
			break
		}
	}
	if err == nil {
		err = b.commit()
	}
	done := pl.groups[:min(b.commited, len(pl.groups))]

	f.bloomMu.Lock()
	for _, g := range done {
		if g.eff.seenNew {
			f.bloom.add(im.p, g.eff.hash) // (not cached: an import's URLs are not links met just now)
		}
	}
	f.bloomMu.Unlock()

	f.mu.Lock()
	for _, g := range pl.groups {
		if g.eff.kind == effQueue {
			delete(f.committing, string(g.eff.it.key))
		}
	}
	for _, g := range done {
		im.effectLocked(g.eff)
	}
	f.signalLocked()
	f.mu.Unlock()
	return err
}

// effectLocked updates the in-memory state for one committed group. Called with mu held.
func (im *importer) effectLocked(e effect) {
	f := im.f
	if e.seenNew {
		f.seen++
	}
	switch e.kind {
	case effQueue:
		h := im.hostLocked(e.host)
		h.queued++
		f.queued++
		if prioOfKey(e.it.key) == bandRevisit {
			h.revisits++
			f.revisitQueued++
		}
		f.insertLocked(h, e.it)
		f.fixLocked(h)
		im.noteLocal(e.hash, localRef{key: e.it.key, host: e.host})
		im.st.Queued++
	case effRetry:
		if (localRef{key: e.delKey, retry: true}).revisit() {
			f.revisitPending++
		} else {
			f.retryPending++
		}
		f.noteRetryLocked(im.p, e.due)
		im.noteLocal(e.hash, localRef{key: e.delKey, host: e.host, retry: true})
		im.st.Retries++
	case effUnqueue:
		if e.retry {
			f.retryPending--
		} else {
			h := im.hostLocked(e.host)
			h.queued--
			f.queued--
			if prioOfKey(e.delKey) == bandRevisit {
				h.revisits--
				f.revisitQueued--
			}
			h.queueGen++
			if i := slices.IndexFunc(h.prefetch, func(it item) bool { return bytes.Equal(it.key, e.delKey) }); i >= 0 {
				h.prefetch = slices.Delete(h.prefetch, i, i+1)
			}
			f.fixLocked(h)
		}
		im.st.Unqueued++
	case effDead:
		f.dead++
	}
}

// hostLocked is Frontier.hostLocked that remembers which hosts the import created.
func (im *importer) hostLocked(name string) *host {
	if im.f.hosts[name] == nil {
		im.newHosts[name] = true
	}
	return im.f.hostLocked(name)
}

func (im *importer) noteLocal(h [16]byte, r localRef) {
	if im.local != nil {
		im.local[h] = r
	}
}

// localRef finds the local q or r key of a URL of p, building the index on first use.
func (im *importer) localRef(txn *badger.Txn, h [16]byte) (localRef, bool, error) {
	if im.local == nil {
		im.local = make(map[[16]byte]localRef)
		for _, fam := range []byte{famQueue, famRetry} {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: famPrefix(fam, im.p)})
			for it.Rewind(); it.Valid(); it.Next() {
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					it.Close()
					return localRef{}, false, err
				}
				var rec qrec
				qk := it.Item().KeyCopy(nil)
				if fam == famQueue {
					rec, err = decodeQrec(v)
				} else {
					qk, rec, err = decodeR(v)
				}
				if err != nil {
					it.Close()
					return localRef{}, false, err
				}
				hn, _, _ := parseQKey(qk)
				ref := localRef{key: it.Item().KeyCopy(nil), host: hn, retry: fam == famRetry}
				im.local[URLHash(rec.URL)] = ref
			}
			it.Close()
		}
	}
	r, ok := im.local[h]
	return r, ok, nil
}

// fixChildren counts the subdomain children (MaxSubdomains) the import's new hosts add.
func (im *importer) fixChildren() {
	if len(im.newHosts) == 0 {
		return
	}
	f := im.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for name := range f.hosts {
		parent := parentHost(name)
		if ph := f.hosts[parent]; ph != nil && (im.newHosts[name] || im.newHosts[parent]) {
			ph.children++
		}
	}
}

// seenWins reports whether an imported seen record replaces the local one: a final state
// (fetched, dropped, dead) beats queued; of two finals the later At wins (ties keep the
// local one); of two queued the local one stays.
func seenWins(local, imported SeenRecord) bool {
	lf, inf := local.State != StateQueued, imported.State != StateQueued
	switch {
	case lf && inf:
		return imported.At.After(local.At)
	case inf:
		return true
	default:
		return false
	}
}

// refetch applies ImportOptions to a decoded record: a fetched URL whose capture may be
// lost becomes a queued discovery record (a revisit's r record too, so the URL is queued
// once, now, and fetched in full); with MarkQueued a queued or waiting URL is marked.
func (im *importer) refetch(r *impRec) error {
	o := im.opts
	switch {
	case o.Refetch == nil && !o.MarkQueued:
		return nil
	case (r.fam == famQueue || r.fam == famRetry) && !(r.fam == famRetry && r.rseq&revisitBit != 0) && prioOfKey(r.qk) != bandRevisit:
		r.rec.Refetch = r.rec.Refetch || o.MarkQueued
		return nil
	case o.Refetch == nil:
		return nil
	case r.fam == famRetry || r.fam == famQueue: // a revisit
		again, err := o.Refetch(r.hash, nil)
		if err != nil || !again {
			return err
		}
		im.requeue(r, r.rec.URL, false)
	case r.fam == famSeen && r.seen.State == StateFetched:
		again, err := o.Refetch(r.hash, &r.seen)
		if err != nil || !again {
			return err
		}
		im.requeue(r, r.seen.URL, true)
	}
	return nil
}

// requeue turns r into a q record that queues url again as a refetch (see
// ImportOptions.Refetch), or leaves it as it is when url's host is not of the partition.
// count: r is the URL's seen record (a revisit's r record comes before it and is not
// counted, so each URL counts once).
func (im *importer) requeue(r *impRec, url string, count bool) {
	f := im.f
	hn, ok := hostOf(url)
	if !ok || f.cfg.PartitionOf(hn) != im.p || URLHash(url) != r.hash {
		if count {
			im.st.NotRefetched++
		}
		return
	}
	f.mu.Lock()
	depth := max(f.cfg.MaxDepth, 0)
	f.mu.Unlock()
	rec := qrec{URL: url, Depth: depth, Links: 1, Refetch: true}
	qk := qKey(im.p, hn, queueBand(0, 0), depth, 0)
	*r = impRec{fam: famQueue, key: qk, val: rec.encode(), host: hn, hash: r.hash, qk: qk, rec: rec}
	if count {
		im.st.Refetch++
	}
}
