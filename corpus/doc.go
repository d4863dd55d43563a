// Package corpus is the extract stage and the text corpus it writes.
//
// Duties:
//
//   - A durable backlog of fetched pages (Badger key family 'x', big-endian sequence numbers),
//     fed by the node after the raw response is in WARC. Enqueue is all-or-nothing and returns
//     ErrBacklogFull past Config.MaxBacklog so the fetch side can apply back-pressure.
//   - Its own worker pool (Config.Workers, default one per core), separate from fetching: a
//     worker reads the page back through Config.Load (from WARC, never from the fetcher's
//     memory), parses it once with x/net/html, walks the DOM once for title, <html lang>,
//     meta robots / TDMRep meta tags, visible characters and characters inside links, and hands
//     the same DOM to go-trafilatura's ExtractDocument for the main text (comments, navigation,
//     boilerplate removed), title and language (whatlanggo on the main text, via trafilatura).
//     Niced workers (Config.Nice) also hold their next page while the machine has no idle
//     CPU besides theirs (Config.DeferBelowIdle, cpuGate): the stage lags a CPU-bound crawl
//     instead of slowing it.
//   - Quality signals (text length, words, visible characters, link density, boilerplate share)
//     and the job's filters (Filters): rejected pages get a record with the reason, no text.
//   - Opt-out signals: noindex and noai from X-Robots-Tag and meta robots (generic, or for our
//     product token Config.UserAgentToken), TDMRep tdm-reservation from the header, the meta
//     tag and the host's /.well-known/tdmrep.json (Job.HostTDMReserved, looked up by the node).
//     Such pages stay in WARC, get a record with OptOut set and, unless
//     Filters.IncludeOptOut, Rejected "opt_out" and no text.
//   - Exact duplicates by SHA-256 of NormalizeText(text) ('c' family: hash -> first page);
//     near-duplicates by a 64-bit fingerprint (SimHash: a one-permutation b-bit MinHash of
//     words placed in their sentences, see simhash.go for why not a textbook SimHash of
//     shingles) looked up in a Manku et al. 4-table index of 16-bit blocks (distance <= 3, at
//     most 4 probes; 'n' family). A duplicate
//     gets a record with duplicate_of / duplicate_kind; export decides whether to keep it.
//   - The corpus: zstd JSONL shards corpus-<node>-<seq6>.jsonl.zst in Config.OutDir, one
//     Record a page, rotated at Config.ShardMaxBytes uncompressed; ReadShards reads them back.
//
// Decisions where the design is silent:
//
//   - Cheap before dear. A page is dropped before any parsing on its response facts (non-2xx
//     status, not HTML, an opt-out header when opt-out pages are excluded), and before
//     go-trafilatura (over 90% of a page's cost) when our own DOM walk already decides it: an
//     opt-out meta tag, link density above the maximum, or visible text too short to ever give
//     MinTextLength characters (unless the page carries JSON-LD, whose articleBody is invisible
//     text trafilatura may use). go-trafilatura runs with HtmlDateMode Disabled (the corpus has
//     no date field) and without its fallback extractors unless Config.Fallback.
//   - Every page gets exactly one record, whatever its outcome, so the corpus accounts for every
//     page fetched (rejected and duplicate records carry no text; Filters.IncludeDuplicates
//     keeps duplicates' text). Record.Kept tells corpus text from the rest.
//   - Only originals enter the duplicate indexes (no chains): a page is compared with the
//     first page that had its text, or with the closest original within 3 bits. A page whose
//     text equals an original's is an exact duplicate even when its SimHash is also near.
//     The same URL fetched again with the same text is an exact duplicate of its earlier fetch.
//   - One committer goroutine makes the duplicate decisions and writes the shard, in arrival
//     order, so decisions never race; workers do the CPU work in parallel.
//   - Bodies that are valid UTF-8 are parsed as they are; others are decoded by the
//     Content-Type charset, a BOM or <meta charset> (x/net/html/charset), as browsers do.
//   - When Filters.Languages is set, a page whose language could not be told is rejected.
//   - Shards rotate at a commit, so a shard may pass ShardMaxBytes by up to CommitEvery records.
//   - A Load error is final for that job: the page gets a record with Rejected "load_failed"
//     (the WARC record is unreadable); a Load cut short by Shutdown leaves the job queued.
//   - The TDMRep sources are combined cautiously: a reservation in any of header, meta tag or
//     tdmrep.json counts, even if another says "0".
//
// Crash safety (at-least-once, made exactly-once by URL + fetch time on recovery):
//
// The open shard is named *.partial. The committer appends records, and every CommitEvery
// records, every CommitInterval and whenever the stage goes idle it commits: zstd block flush,
// fsync, and only then one Badger batch deleting the jobs of those records (and saving the
// counters). So a job leaves the backlog only after its record is durable; a crash redoes at
// most the jobs since the last commit. On Start, each .partial shard of this node is read up to
// its last complete line; the backlog jobs whose URL and fetch time appear in it are deleted
// (their records survived), then the shard is rewritten as a finished shard (via a .recover
// file and a rename), in that order so that a crash during recovery is itself recoverable. The
// other jobs are redone. The duplicate indexes are written as decisions are made, before the
// record is durable; a redone page that finds itself there (same URL and fetch time) counts as
// the original, so a redo neither loses a page nor marks it a duplicate of itself. The indexes
// are as durable as the node's Badger options make them.
//
// Shutdown is graceful: pages being extracted are finished and recorded, pages still being
// loaded stay queued, the shard is committed and renamed to its final name.
package corpus
