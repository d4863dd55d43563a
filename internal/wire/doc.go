// Package wire is the framing the node-to-node streams share: the snapshot stream of a
// partition handoff (package snapshot) and the replica stream of partition copies
// (package replica).
//
// Duties:
//   - Unsigned varints (encoding/binary's uvarint) and length-prefixed byte fields: a
//     uvarint length, then the bytes. Appended to a slice (a block built in memory), written
//     to a bufio.Writer (a stream), read back from a bufio.Reader or cut from a slice, with a
//     bound on the length a reader accepts.
//   - Counting the bytes a stream puts on the wire (Counter), optionally through a hash
//     (the snapshot's whole-stream checksum).
//
// Decisions where the design is silent:
//   - Writes to a bufio.Writer return its error, which callers may drop: bufio's errors are
//     sticky, and every stream ends with a Flush that reports the first one.
//   - A field over its bound is ErrTooLarge on a stream and "not ok" on a slice; the
//     caller words the error in its own terms (snapshot's ErrCorrupt).
//   - Nothing here knows a stream's magic, sections or checksums: those stay with the
//     stream's package, which owns its format; this package only keeps the byte-level
//     encoding of a field the same in both.
package wire
