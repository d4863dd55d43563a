// Package archive keeps the raw pages: every fetched response and its request as WARC 1.1
// records (ISO 28500:2017) in gzip files any WARC tool reads, and reads them back.
//
// Duties:
//   - Write request, response and revisit records with WARC-Target-URI, WARC-Date,
//     WARC-Record-ID, WARC-IP-Address, WARC-Block-Digest, WARC-Payload-Digest (sha1:BASE32, the
//     form pywb/OpenWayback/CDX indexers expect), WARC-Concurrent-To and WARC-Warcinfo-ID.
//   - One gzip member per record; a warcinfo record at the head of every file; files
//     <prefix>-<yyyymmddhhmmss>-<seq5>-<node>.warc.gz rotated by size and, with MaxFileAge,
//     by age (an uploader ships closed files only, so age bounds what waits unshipped).
//   - Return a Location (file, member offset, member length) for each response/revisit: the
//     URL -> record index the crawl loop keeps in its seen set (Location.MarshalBinary). Index
//     rebuilds that mapping from a file.
//   - Read back by Location (ReadResponse) or sequentially (Scan), verifying digests.
//   - Write a CDXJ index beside every closed file (NAME.warc.gz.cdxj), rebuild a missing one
//     from the file, merge the indexes of many files (MergeIndexes) and package files, index
//     and page list as WACZ 1.1.1 (WriteWACZ).
//   - Survive crashes, full disks and damaged files without losing complete records.
//
// Data flow:
//
//	fetch worker --WriteExchange--> encode records + gzip into a private buffer (no lock)
//	             --> lock: one write(2) of both members at the end of the current file --> Location
//	background loop: fsync every SyncInterval if anything was written
//
// # Decisions where the design is silent
//
// gowarc. Records are written directly in gowarc v1.2.0's layout and field order (Content-Length,
// WARC-Block-Digest and, for request and response records, WARC-Payload-Digest after the given
// fields); a test holds the two byte for byte. Building through gowarc's RecordBuilder copied each
// block twice and hashed it four times (build, then validate), which cost more CPU than gzip on
// the crawl's profile. Its WarcFileWriter is not used either: it hides member offsets, names
// files its own way and rotates on its own, while we need exact offsets for Location, our
// naming, repair on open and cut-back after a failed write. Reading back uses a small parser
// of our own (strict about the grammar, verifies digests). Record ids are random v4 urn:uuid
// drawn by this package. A caller that hashed the body already passes Exchange.PayloadDigest.
//
// Record layout. Response first, then its request; each carries WARC-Concurrent-To naming the
// other (both directions, as the spec allows, so either record finds its pair). A revisit
// holds only the HTTP response header as its block (Content-Type application/http;
// msgtype=response), WARC-Profile, WARC-Refers-To-Target-URI, WARC-Refers-To-Date, optional
// WARC-Refers-To, and the referred WARC-Payload-Digest; WARC-Truncated is not set on revisits
// (warcio does the same). WARC-Date has second precision (RFC 3339, UTC) for old readers.
// Payload digests are over the body exactly as stored (possibly content-encoded); the response
// header must describe that body (see Exchange.ResponseHeader).
//
// Concurrency. Compression happens outside the writer lock into a per-call pooled buffer; the
// lock covers only the append (one WriteAt of request+response, so a pair never straddles a
// rotation). Records name their file's warcinfo record, so a call that raced with a rotation
// re-encodes under the lock (at most once per rotation).
//
// Durability (fsync policy). WriteExchange returns after write(2) of the records, so a crash
// of the process loses nothing that was acknowledged: the page can be parsed after the return
// and a crash during parsing costs a re-parse, not a re-fetch. fsync runs every SyncInterval
// (default 1s) when something was written, at rotation, on Sync and on Close; a power loss can
// lose at most the last SyncInterval of records, and Open cuts any torn tail it leaves.
// A node calls Sync before it records a page as fetched (its commit path, group-committed),
// so the records a power cut can drop are only those of pages not yet recorded.
//
// Rotation. A file is closed (fsync + close) by the write that makes it reach MaxFileSize; the
// next write creates the next file. Files are created lazily, so no file holds only a warcinfo.
// Sequence numbers continue from the highest found in Dir for the prefix.
//
// Repair on Open. The newest file of this prefix and node is scanned (gunzip + parse + digest
// check, roughly a second per GiB). If it ends in a half-written member, garbage or zeros, it is
// truncated back to the end of its last complete record (logged with offset and bytes cut) and
// appended to. If the damage is followed by another valid record it is not a torn tail: the
// file is left untouched (logged) and a new file is started. A file with no complete record is
// removed. The writer never appends after garbage. Older files are not inspected (use Scan).
//
// Write errors. Every I/O error wraps ErrIO, or ErrDiskFull when it is ENOSPC/EDQUOT (the
// original error stays in the chain). After a failed or short write the file is truncated back
// to the end of the last complete record so later appends follow a good record; if the
// truncate fails too, the file is abandoned (fsynced, closed, logged with the offset of its bad
// tail) and the next write starts a new file. A failed file creation removes the new file. The
// writer stays usable: once space is freed writes succeed again.
//
// CDXJ index. In the form pywb writes and reads: one line per response, revisit, resource
// and metadata record (request and warcinfo records are not looked up by replay tools),
// "SURT TIMESTAMP {json}" with url, mime (media type of the HTTP payload; "warc/revisit" for
// revisits), status, digest (WARC-Payload-Digest as written, "sha1:BASE32"; for revisits the
// referred payload's), length and offset of the gzip member, filename; numbers as JSON strings,
// as pywb writes them; lines sorted by their bytes (LC_ALL=C sort, pywb's order). The writer
// builds each line from what it wrote (the JSON up to the offset outside the lock, offset and
// file name under it) and keeps a file's lines in memory (about 300 bytes a record: some 6 MB
// for a 1 GiB file of 50 KB pages); at rotation and Close it sorts them and writes the index
// through a temporary file, fsync and rename, under the writer lock (tens of ms a 1 GiB file,
// see BENCHMARKS.md "WARC writing"); an index that cannot be written (a full disk) is logged,
// not returned, as it is derived data the next Open rebuilds. The file adopted at Open gets its lines from the repair
// scan, and an index it had is removed (appends make it stale). Files of this prefix and node
// without an index (a crash between close and index, data written before indexes existed)
// are re-indexed from the WARC file by a background goroutine started by Open; Close stops
// it between files and the next Open goes on. A damaged file gets no index file (a partial
// one would hide the damage): IndexLines returns a Damage naming the file and the offset,
// with the lines of the records before it, and MergeIndexes merges those, reports the
// Damage and goes on with the other files, so one bad file never stops an export. The file a
// running node is writing has no index yet and may end inside a record being appended: its
// lines then stop at the last complete record, reported the same way.
//
// SURT. No SURT module is served by the Go module proxy (internetarchive/gosurt is not; nlnwa
// and CorentinB gowarc have none), so surt.go implements the transform pywb uses: the Python
// surt package's surt(url) with its defaults (Google's then IA's canonicalizer, IPv4 hosts
// reversed too), tested against that package's own expectations. Not done: IDNA errors fall
// back to the raw host, and inet_aton's hexadecimal forms are not read as addresses.
//
// WACZ. Each WARC file goes into archive/ stored (zip method 0), not re-compressed; the index
// and page list are deflated. pages.jsonl lists each URL once (its first capture in index
// order) when it was fetched as text/html with status 200; titles come from the caller (the
// corpus). The merged index and page list go through temporary files, so memory stays flat.
//
// Reading errors. Scan delivers every good record before damage, then returns an error naming
// the file and offset, wrapping ErrTruncated (the data ends inside a gzip member) or ErrCorrupt
// (not a gzip member, bad checksum, bad WARC grammar, or ErrDigest on a digest mismatch).
// Only files with one record per member (what this package writes) are read. ReadResponse
// checks a Location against the file's size before it allocates: a location from a damaged
// index or store that runs past the end is ErrTruncated, whatever length it names.
package archive
