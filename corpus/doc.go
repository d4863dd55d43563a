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
//     The text's evidence wins: <html lang> is used only when the text tells no language, so
//     a page whose attribute is wrong (German text, lang="en") is recorded and filtered as
//     what it is written in.
//     Niced workers (Config.Nice) also hold their next page while the machine has no idle
//     CPU besides theirs (Config.DeferBelowIdle, cpuGate): the stage lags a CPU-bound crawl
//     instead of slowing it.
//   - Quality signals and the job's filters (Filters), judged on the main text go-trafilatura
//     extracted, as Gopher and FineWeb judge the extracted text: its length and words, its link
//     density (the share of its non-space characters that sit inside <a> on the page), and,
//     against the page's visible characters, the boilerplate share. Rejected pages get a record
//     with the reason, no text.
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
//     With Config.Decider (the node sets package dedup's, which asks each key's owner in
//     the cluster) the committer decides up to DecideBatch ready pages in one call instead,
//     with the same rules; a call that fails is retried with backoff, writing nothing and
//     keeping the jobs queued, so an unreachable owner holds extraction back (bounded by
//     MaxBacklog), never fetching, and decides nothing on a guess.
//   - Markdown beside the text (Record.Markdown, unless Config.NoMarkdown): the same main
//     content go-trafilatura's text is made of, with headings, paragraphs, lists, tables,
//     code blocks, emphasis, links (absolute) and images' alt text; see "Markdown" below.
//   - The corpus: zstd JSONL shards corpus-<node>-<seq6>.jsonl.zst in Config.OutDir, one
//     Record a page, rotated at Config.ShardMaxBytes uncompressed; ReadShards reads them back.
//
// Decisions where the design is silent:
//
//   - Cheap before dear. A page is dropped before any parsing on its response facts (non-2xx
//     status, not HTML, an opt-out header when opt-out pages are excluded), and before
//     go-trafilatura (over 90% of a page's cost) only where the outcome is already certain: an
//     opt-out meta tag (a fact of the page, not an estimate), or no text at all (the shortcut
//     below). The filters that judge content (length, link density, language) run on the main
//     text only: a page's navigation, menus and footers are mostly links, and judging link
//     density on the whole page dropped 16% of real news, blog, shop and forum pages whose
//     articles go-trafilatura keeps (docs/bench-log/2026-12-02-quality-prefilter.md).
//     go-trafilatura runs with HtmlDateMode Disabled (the corpus has no date field) and without
//     its fallback extractors unless Config.Fallback.
//   - Link density of the main text: go-trafilatura's result keeps no <a> (its ContentNode has
//     links stripped unless IncludeLinks, which changes the text of half of real pages), so
//     the main text's words are aligned in document order with the page's words, each of which
//     knows how many of its characters sit inside <a> (pageWords.linkCharsOf). Words that
//     cannot be placed (reordered, from JSON-LD) count as outside links, so the density errs
//     low rather than dropping an article.
//
// The shortcut, and why it drops only pages the full path drops too:
//
// Without JSON-LD and without the fallback extractors, go-trafilatura v1.12.2 builds its main
// text only from the page's text nodes outside <script> and <style> (its main extractor from
// its cleaned tree, its baseline from the first <article>, the paragraphs, the body or the
// whole document, <head> and <noscript> text included); the only characters it adds are
// spaces, and it trims the result. pageWalk.reach counts the non-space characters of all
// those text nodes, so a page with reach 0 gets no text on the full path ("no_text") and skips
// go-trafilatura. That is the one shortcut. JSON-LD articleBody is text no node shows, and
// readability and dom-distiller (Config.Fallback) are outside this argument, so such pages
// always go to go-trafilatura.
//
// Dropped shortcuts: link density over the whole page (wrong on 16% of real pages, see
// above), and "visible text shorter than MinTextLength/2". The latter assumed the main text
// is at most the visible text plus separators, but go-trafilatura's main extractor can repeat
// text (a real privacy-policy page of 9,001 visible non-space characters gives 25,832, its
// paragraphs up to 6 times), and its baseline can return <title> and <noscript> text, so no
// bound from the page's counts holds for every page. Nor has link density a safe bound: the
// page's links say nothing certain about the main text's. The cost is small: such pages are
// short, and go-trafilatura is cheap on short pages.
//
// TestRealWorldShortcut holds the shortcut to go-trafilatura's ~1000 real-world comparison
// pages (a sample under -race; CORPUS_REALWORLD=all for every page), and BenchmarkRealWorld
// reports the stage's CPU per page, its share of pages without text and its text quality by
// the set's own snippets on the same pages. Both skip when the module directory is absent.
//
// Markdown:
//
// It is made from go-trafilatura's main-content tree (ExtractResult.ContentNode), the tree its
// text comes from, so it holds nothing the text leaves out. That tree keeps headings,
// paragraphs, lists, tables, code and emphasis, but neither links nor images: its options
// IncludeLinks and IncludeImages would keep them, but they change what go-trafilatura
// extracts (the text of 30% of the real-world pages changed, and the set's F1 fell from
// 0.897 to 0.889), and a second run costs as much as the first. So the links and images are
// put back from the page: the tree's words are aligned with the page's words as for link
// density, a run of words that sat in one <a href> becomes a link (resolved against the page
// URL and its <base href>; javascript: and data: references are dropped), and an image with
// alt text that sat between two words kept next to each other (nothing between them dropped)
// comes back before the second, as a paragraph of its own where it stood between blocks.
// Images without alt text carry nothing for a reader of text and are left out. go-trafilatura
// turns <pre><code> into a <code> among blocks; that becomes a fenced code block again (and a
// <code> around whole tables is undone). A heading in a table cell becomes bold, list items
// outside a list get one, and a table without a header row gets its first row promoted, so
// that GFM can show every table. Only kept pages get Markdown (duplicates lose it with their
// text). TestRealWorldMarkdown holds it to the real-world pages: the tree's headings, list
// items and tables are found as such in the Markdown, and nothing the set marks unwanted that
// the text leaves out appears in it.
//
// The tree is converted by github.com/JohannesKaufmann/html-to-markdown/v2: it takes an
// x/net/html node as it is (no serialising and re-parsing), is CommonMark with GFM tables and
// strikethrough as plugins, escapes Markdown characters in text, is pure Go and maintained
// (v2.5.2 of June 2026 is used). Writing our own would mean owning escaping,
// list nesting and table rules that it already has tests for. The cost is measured by
// BenchmarkRealWorld (with and without Markdown, BENCHMARKS.md).
//
// Record format: shards carry no version number; fields are only ever added, with omitempty,
// so shards written before Markdown existed read as records with an empty Markdown.
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
