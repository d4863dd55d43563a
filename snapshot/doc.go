// Package snapshot streams one partition's frontier state from one node to another: the
// wire format of a handoff, a decommission or a backup, with the checks that make a
// damaged or misdirected stream fail loudly instead of merging garbage.
//
// Duties:
//   - Write: a header (partition, epoch, sender, receiver, creation time, format version),
//     then the records an exporter yields (family byte, key, value), packed into zstd
//     blocks of about BlockSize raw bytes, each with a CRC32C, then a trailer with the
//     record and block counts and a CRC32C of every byte before it. Memory stays bounded
//     by one block (plus one record, at most MaxValue) however large the partition is.
//   - Read: verifies the magic, version and header checksum, lets the receiver refuse the
//     stream from the header alone (expect returns ErrWrongPartition or ErrStaleEpoch: the
//     receiver does not own that partition at that epoch), then yields records block by
//     block and returns io.EOF only after the trailer verified.
//
// Wire format (all integers big-endian unless marked uvarint):
//
//	magic "CRWLSNAP" | version u16 | hdrLen u32 | header | hdrCRC u32 (CRC32C of all before it)
//	header  = partition u16 | epoch u64 | created i64 (unix ns) | uvarint len + from | uvarint len + to
//	block   = 'B' | rawLen u32 | records u32 | compLen u32 | hdrCRC u32 | dataCRC u32 | zstd(raw)
//	          hdrCRC = CRC32C of rawLen, records, compLen (lengths are checked before any
//	          allocation); dataCRC = CRC32C of the compLen compressed bytes
//	raw     = record*,  record = family u8 | uvarint keyLen | key | uvarint valueLen | value
//	trailer = 'T' | records u64 | blocks u64 | rawBytes u64 | streamCRC u32 | trailerCRC u32
//	          streamCRC = CRC32C of every byte before the trailer; trailerCRC of the trailer before it
//	then the end of the stream (trailing bytes are corruption).
//
// The uvarint length-prefixed fields are internal/wire's, shared with the replica
// stream (package replica); TestWireBytesFixed pins the bytes.
//
// Decisions where the design is silent:
//   - Limits: keys at most MaxKey (4 KiB), values at most MaxValue (16 MiB), a block's raw
//     size at most MaxBlock, the header at most 4 KiB. A reader never allocates more than a
//     limit allows, and allocates a block's buffers only as its bytes actually arrive, so a
//     lying length costs an error, not memory.
//   - Every damage is an error wrapping ErrCorrupt (checksum, count or structure wrong) or
//     ErrTruncated (the stream ended early), never a panic.
//   - Records are yielded as soon as their block verified, before the trailer: the
//     frontier's merge is idempotent, so applying a prefix of a stream is harmless. The
//     trailer's job is to make the import fail when the stream was cut after a block
//     boundary; the sender then retries the whole stream (STYLE 9: retries are free), and
//     the receiver commits the handoff only after an import that returned no error.
//   - The stream CRC covers the header and every block exactly as sent, so a block that
//     was dropped, repeated or reordered (each with a valid CRC of its own) is caught.
//   - Epoch and partition are checked by the receiver's expect callback; the package only
//     carries them. The sender aborts when the lease table changes by returning an error
//     from its export function (Write stops and returns it).
package snapshot
