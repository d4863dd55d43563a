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
//   - A job with PayloadOf (a WARC revisit record whose identical payload another node
//     archived, so the bytes are not here) is not read back: its record is an exact
//     duplicate of that URL, with no text, and enters no index.
//   - Markdown beside the text (Record.Markdown, unless Config.NoMarkdown): the same main
//     content go-trafilatura's text is made of, with headings, paragraphs, lists, tables,
//     code blocks, emphasis, links (absolute) and images' alt text; see "Markdown" below.
//   - PDFs (declared application/pdf or x-pdf, or a body starting with %PDF- whatever its
//     label): text, Markdown, title, language and page count from PDFium; the same
//     duplicate indexes and text filters as pages; see "PDFs" below.
//   - The corpus: zstd JSONL shards corpus-<node>-<seq6>.jsonl.zst in Config.OutDir, one
//     Record a page, rotated at Config.ShardMaxBytes uncompressed or Config.ShardMaxAge after it
//     was opened (an uploader ships finished shards only); ReadShards reads them back.
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
// PDFs:
//
// The node queues a 2xx response for the stage when it is a PDF by its Content-Type
// (application/pdf, application/x-pdf) or by its bytes (the %PDF- header within the first
// 1024 bytes, where readers accept it), also behind a text/html label. In the stage a body is
// read back and sniffed only for HTML and the types a mislabeled PDF is commonly served as
// (application/octet-stream, text/plain, application/x-download...); images, scripts and
// the like are dropped on their type without a WARC read.
//
// Library: PDFium (Chrome's PDF engine) compiled to WebAssembly, run by wazero through
// github.com/klippa-app/go-pdfium/webassembly v1.21.5: no cgo, so the FROM scratch image
// stays. PDFium's text matches poppler's pdftotext on real documents (word F1 1.000 and
// 0.9995 on the two Debian manuals in testdata/pdf, TestPDFRealWorld); it opens what
// browsers open, repairs what they repair, handles every standard filter, font encoding
// and security handler, and is fuzzed continuously upstream. The pure-Go reader tried,
// github.com/ledongthuc/pdf (a fork of rsc.io/pdf, no tagged release), scored word F1 0.22
// and 0.16 against pdftotext on the same two manuals: its GetPlainText drops the spaces
// that TeX makes by positioning ("AbstractSyntaxNotationOne(ASN.1)library..."), at a
// similar CPU cost (docs/bench-log/2026-12-03-pdf.md), and runs in the node's own memory
// with no cap of its own. pdfcpu (approved here only from an old copy) validates and edits
// PDFs; its extract command gives raw content streams, not text in reading order.
//
// Costs, measured in BENCHMARKS.md ("PDF extraction"): the binary grows
// by ~11 MB (the 6 MB module plus wazero); wazero compiles the module once per process,
// ~8-14 s of one core and some 300 MB of heap while it runs, so the engine starts on the first
// PDF (a crawl without PDFs pays nothing) and keeps its compiled code in PDFConfig.CacheDir
// (the node's default: the user's cache directory, else the data directory), from which
// a restart loads it in ~0.25 s; engine starts are serialized in a process, so the nodes of
// an in-process test cluster compile once. An instance serves one document at a time and
// then the next (a fresh one costs ~12 ms of CPU, as much as a one-page document's text),
// unless its document failed, timed out or grew its memory past 64 MiB: then it is
// dropped, so a document that broke or exhausted an instance leaves nothing behind, and a
// big document's memory is returned. At most Workers+1 instances exist (one a worker, one
// for Stage.Page).
//
// A page that panics the extractor (the HTML parser, go-trafilatura, the Markdown converter,
// the language detector or our own walk of the DOM) is recovered in extractor.run: it gets a
// record rejected "extract_panic" (detail: the panic's message), one error log line with the
// URL, the WARC location and the first 4 KiB of the stack, and a count in
// Stats.ExtractPanics (the node's extract_panics_total). Its job is committed and deleted like
// any other, so it is never retried: a page that panics once would panic again at every
// restart and take the node down each time. The Markdown converter keeps its own recover
// (the page loses its Markdown, keeps its text). TestStageExtractPanic plants a page that
// panics through an unexported hook (no real input is known to panic these libraries).
//
// Limits and reasons (Record.Rejected; the record keeps its WARC location either way):
// a body over PDFConfig.MaxBytes (default 32 MiB) is "too_large" unopened; a document
// that needs a password or an unknown security handler is "pdf_encrypted" (one with an
// empty user password, owner restrictions only, is read as readers do); one PDFium cannot
// open is "pdf_broken" (it first tries to repair a broken cross-reference table); over
// PDFConfig.MaxPages (default 500) is "pdf_too_many_pages", told from the page tree before
// any page is read; past PDFConfig.Timeout (default 30 s, open to last page) a watchdog
// kills the instance (wazero's WithCloseOnContextDone interrupts it inside PDFium) and the
// record is "pdf_timeout"; an instance's WebAssembly memory is capped at
// PDFConfig.MaxMemory (default 512 MiB), and a document that needs more (a
// decompression bomb, a huge image) makes PDFium abort: "too_large" (told from other
// traps by the instance's memory at the time, near the cap); pages with no text at all
// (scans without OCR) give "pdf_no_text_layer". A panic in the Go side of the engine is
// recovered ("pdf_broken"). At most 4 Mi characters are taken from a document (pages
// after that are not read). TestPDFHostile runs broken, truncated, garbage-xref,
// encrypted, 200,000-page, 4 GiB-bomb and deeply nested files through a stage: each gets
// its record, and a good PDF after them is extracted.
//
// Text and Markdown: PDFium's text per page in its reading order (FPDFText_GetText, its
// lines separated by the line breaks it generates), with, for each line, the font size
// of its first character and its position (two more calls a line, not one a character).
// pdfLayout then makes paragraphs (by vertical gaps against the page's usual line gap,
// font size changes, columns, page breaks) and headings by font size: lines set at least
// 15% above the body size (the size most characters use), ranked into #, ## and ### by
// size. The document outline (bookmarks) is not used: many PDFs have none, and its titles
// need matching to the text. Line-end hyphens PDFium marks are joined when the word goes
// on in lower case. Text is one paragraph or heading a line; Markdown the same blocks with
// headings marked and Markdown characters escaped. Title: the document information's
// Title unless empty or a file name ("report.docx", "Microsoft Word - ..."), else the
// first heading, else the first line. Language: whatlanggo (the detector go-trafilatura
// uses for pages) on the first 64 KiB of the text. The filters that judge text apply
// (MinTextLength, Languages); link density and boilerplate share are HTML facts and stay
// 0; Quality.VisibleChars is the text's non-space characters. Duplicates: the same exact
// and near indexes as pages, so a PDF served under two URLs is an exact duplicate.
//
// CPU: PDF work runs inside a worker's process call, on the worker's own (niced) thread
// and after the worker passed the CPU gate (cpuGate) like any page: the fetch stage never
// waits for it. TestPDFGate shows a PDF job held while the gate is closed.
//
// Record format: shards carry no version number; fields are only ever added, with omitempty,
// so shards written before Markdown existed read as records with an empty Markdown.
//
// Back-pressure: Config.Hold (the node's "disk full") is asked before each page; while it
// says so the workers wait, holding their page, so no record or commit meets a full disk;
// the backlog stays queued and Enqueue pushes back on the fetch stage as usual
// (TestStageHold).
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
