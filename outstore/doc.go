// Package outstore ships a node's outputs to S3-compatible object storage
// (--output-store s3://BUCKET/PREFIX) and reads them back for export --from.
//
// Duties:
//   - Dial: check the target URL, the endpoint, the credentials and the bucket at start, so
//     a bad setting is one clear error before the node starts anything.
//   - Uploader: upload every closed WARC file with its CDXJ index and every finished corpus
//     shard, verify each, and list it in the node's manifest; retry with bounded, jittered
//     exponential backoff while the store is down; report the unshipped bytes so the node
//     pauses fetching past a bound; optionally remove local copies once verified.
//   - Store.Nodes / ReadManifest / Download: what export --from reads, verified by SHA-256.
//
// Layout in the bucket:
//
//	PREFIX/nodes/NODE/warc/<file>.warc.gz        a closed WARC file
//	PREFIX/nodes/NODE/warc/<file>.warc.gz.cdxj   its CDXJ index (one line per response/revisit)
//	PREFIX/nodes/NODE/corpus/corpus-NODE-SEQ.jsonl.zst   a finished corpus shard
//	PREFIX/nodes/NODE/manifest.jsonl             the node's manifest, one Entry per object
//
// # Decisions where the design is silent
//
// Client. minio-go v7 (Apache-2.0): a small, well-kept S3 client that signs requests,
// does multipart uploads from a file in parallel parts and speaks to any S3-compatible
// store; the AWS SDK v2 would pull in far more for the same calls. No signing is written
// here. The client makes one try per call (MaxRetries 1): the uploader's own backoff
// decides when to try again, and a start-time check fails fast.
//
// What is "closed". A WARC file is closed once its CDXJ index exists beside it: the
// archive writer writes the index when it closes a file (by size, by age, at shutdown) and
// rebuilds a missing one at start; it removes the index before appending to an adopted file.
// A corpus shard is finished once it has lost its .partial suffix. Open files are never
// shipped; their bytes count as unshipped.
//
// Finding work again after a crash: a scan, not a durable queue. The closed files on disk
// and the manifest in the store are the whole truth; the uploader compares the two (by name
// and size) at start and at every scan (every ScanInterval, and on Wake when a file closes).
// A queue would be a second record that can disagree with them (a file shipped but not
// dequeued, or queued and then lost); the scan of two small directories costs nothing
// next to an upload. A file the archive writer adopts and appends to after a restart gets a
// new size, so it is shipped again and its entry replaced.
//
// Manifest. One JSON Lines object per node, rewritten whole (one PUT, atomic for readers)
// after each upload's objects are verified, so a reader never sees an entry for a missing
// object. Only the node writes its own manifest, so there is no race between writers. An
// entry has key, file name, kind (warc, cdxj, corpus), size, SHA-256, ETag, records (a WARC
// file's responses and revisits, counted from its index; a shard's records) and upload time.
// Per node, the manifest says which WARC files (and through their indexes, which records)
// reached the store: when a node is lost for good, the new owners of its partitions read
// its manifest and fetch again the pages whose records are not in a listed file (package
// replica, refetch.go).
// Rewriting it costs O(entries) a upload, ~300 bytes an entry: with 5-minute rotation a
// week is ~6,000 entries, a ~2 MB PUT after each upload; a much longer crawl would want the
// manifest split (by day, say), which readers can take as a list of objects.
//
// Verification. Before an upload the file is read once for its SHA-256 and for the ETag S3
// must return: the MD5 of the object for a single PUT, or for a multipart upload the MD5 of
// the parts' MD5s with "-N", computed with minio-go's own part layout
// (minio.OptimalPartInfo) for the configured part size. The ETag of the PUT and of a fresh
// HEAD must both match, as must the size; otherwise the upload counts as failed and is
// retried. SeaweedFS and AWS S3 return these ETags for unencrypted objects. The SHA-256 is
// stored in the manifest and the object's metadata (x-amz-meta-sha256), and export --from
// checks every download against it.
//
// Multipart. Files above PartSize (default 32 MiB) go up in parts, two in flight; WARC
// files are up to 1 GiB, so about 32 parts.
//
// Backoff. RetryBase (1s) doubled per failure in a row, capped at RetryMax (1m), each wait
// drawn from [half, full] so nodes do not retry in step. Uploads are retried for as long as
// the node runs: the bound is on the local bytes waiting (MaxUnshipped), past which the
// node pauses fetching, not on the number of tries.
//
// Local copies (DeleteAfterUpload). A file is removed only after its objects are verified
// and the manifest listing them is written, and only when CanDelete agrees (the node keeps
// a WARC file while extract jobs may still read it). The newest file of each kind stays on
// disk, so the archive writer and the extract stage continue their file numbering after a
// restart and never reuse a name the store already holds. The local state file
// (Config.StateFile) keeps a copy of the manifest so export --data can say which files are
// only in the store.
package outstore
