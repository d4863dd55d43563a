// Package s3test runs a real S3-compatible server, SeaweedFS's `weed server -s3`, on
// loopback for tests: the object store the output store (outstore) is tested against.
//
// Duties:
//   - Start weed in a test's own temp directory on free loopback ports with an S3 identity
//     (access key and secret), wait until its S3 endpoint answers, create a bucket.
//   - Stop it and start it again on the same directory and ports (an outage), and stop it
//     at the end of the test (t.Cleanup).
//   - Skip the test with one line saying how to build the binary when it is missing; wait
//     for it (at most BuildWait) while .ci/build-seaweedfs is building it, as .ci/run does
//     in the background while the tests run (the build's marker file names its pid).
//
// Decisions where the design is silent:
//   - The binary is built by .ci/build-seaweedfs into
//     ${XDG_CACHE_HOME:-$HOME/.cache}/crawlnode/weed-<version>; CRAWLNODE_WEED overrides
//     the path. It is not a Go dependency of this module: SeaweedFS's module has replace
//     directives and a very large dependency tree, so it is built apart as its own main
//     module and run as a process, the way an operator runs it.
//   - `weed server` (master, volume, filer and S3 gateway in one process) rather than
//     `weed mini`, which also starts WebDAV, an admin UI and an Iceberg catalog on further
//     ports. Telemetry is switched off (-master.telemetry=false): nothing may leave
//     loopback. Every listener binds 127.0.0.1; gRPC ports are chosen explicitly (weed's
//     default is port+10000, which may be taken), the Iceberg and Lance ports are off, and
//     the Unix sockets live in a short temp dir (socket paths are limited to 108 bytes).
//   - Bucket auto-creation is off (-s3.autoCreateBucket=false), so a missing bucket stays
//     missing, as on a real store.
//   - Free ports are found by binding :0 and closing; a port taken in between makes the
//     start fail and the start is retried on new ports (at most three times).
package s3test
