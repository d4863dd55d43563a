// Package linkscan is the fetch path's fast page reader: it finds a page's
// links and the signals that govern them, and reads sitemaps. Main-text
// extraction is not here (see package corpus); this package must stay cheap
// enough to run on every fetched page before the page leaves the frontier.
//
// Duties:
//
//   - Parse: one pass over an HTML body, no DOM, collecting <a>/<area> href,
//     <frame>/<iframe> src, <link rel=canonical>, the first <base href>, the
//     first <title>, and the robots, crawlnode and TDM (tdm-reservation,
//     tdm-policy) meta tags, exactly as the golang.org/x/net/html tokenizer
//     reads them. A scanner of our own (scan.go) reproduces the tokenizer's
//     token boundaries over the body in place and skips text with
//     bytes.IndexByte, about 2.5-3x faster than the tokenizer's byte loop;
//     for the rare page it declines, the tokenizer itself runs (parseTokens).
//     Fuzz and real-page tests hold the two to the same answers.
//   - Page.Resolve: turns the followable links into canonical URLs with
//     urlnorm, deduplicated within the page.
//   - HeaderSignals: the same signals from X-Robots-Tag and tdm-reservation
//     response headers.
//   - ParseSitemap: <urlset> and <sitemapindex> documents, plain or gzip.
//
// # Decisions where the brief is silent
//
//   - Bounds. Parse stops reading after MaxLinks links (the meta tags that
//     matter sit in <head>, before them). Link URLs longer than
//     urlnorm.MaxInputLength (huge data: URIs, junk) are skipped without being
//     copied; the title is cut at MaxTitleBytes. The tokenizer itself works in
//     time linear in the body, whose size the fetcher bounds, and tag
//     attribute values are read in place, so a giant token costs a scan, not
//     an allocation.
//   - <noscript>, <noframes> and <noembed> are parsed as markup, not as raw
//     text: the crawler runs no scripts and shows no frames, so their content
//     is what it would see. <script>, <style>, <textarea>, <title>, <xmp>,
//     <iframe> and <plaintext> content stays raw text, so "<a href" inside a
//     script is never a link.
//   - rel is a case-insensitive, white-space separated token list; only the
//     "nofollow" token marks a link NoFollow ("ugc" and "sponsored" are hints
//     with no crawl meaning). A <link> is taken only when rel holds
//     "canonical"; Page.Canonical is the first one.
//   - Meta robots: names "robots" and "crawlnode" (case-insensitive) apply;
//     other crawlers' names (googlebot, ...) do not. Directives are separated
//     by commas and/or white space, case-insensitive: noindex, nofollow,
//     none (= noindex + nofollow), noai, noimageai. Anything else is ignored.
//   - X-Robots-Tag: a "name:" prefix in a header value scopes the directives
//     after it (in that value) to that crawler; only unscoped directives and
//     those for "crawlnode" apply. Directives that carry a value
//     (unavailable_after, max-snippet, ...) are recognised and skipped, not
//     mistaken for a crawler name. "noimageai" in a header is not reported
//     (HeaderSignals has no place for it; the text corpus does not hold images).
//   - TDM (W3C TDM Reservation Protocol): reserved when tdm-reservation is
//     exactly "1" after trimming; tdm-policy is kept raw.
//   - Page.Resolve: <base href> is resolved against the page URL; when that
//     fails or is not http(s), the page URL is the base (the HTML standard
//     falls back the same way for failures and refuses data: and javascript:
//     bases). The canonical link is followed even when NoFollow applies, as
//     the brief asks. Links are handed over in document order; the first
//     occurrence of a canonical URL wins.
//   - Sitemaps (sitemaps.org): gzip is recognised by its magic bytes. The
//     decoded document is capped at MaxSitemapBytes and MaxSitemapURLs; past
//     either, parsing stops with an error wrapping ErrSitemapLimit after the
//     entries read so far were delivered. A missing priority is 0.5 (the
//     protocol's default), an invalid one too, and values are clamped to
//     [0, 1]. changefreq is lower-cased and "" unless one of the protocol's
//     values. lastmod accepts the W3C Datetime forms; unparseable is the zero
//     time. Encodings: UTF-8 (also "us-ascii") and ISO-8859-1; others fail.
//     Element names are matched on their local name, so any namespace (or
//     none) is accepted. Entries without <loc> are skipped.
package linkscan
