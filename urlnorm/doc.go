// Package urlnorm turns the links a crawler finds into canonical URLs, the
// crawler's one notion of "the same URL", as written in docs/CANONICAL_URLS.md.
//
// Duties:
//
//   - Canonicalize an absolute URL; Resolve a reference against a base URL and
//     canonicalize the result; Resolver parses a page's base once and resolves
//     its many links (the fetch path's hot loop).
//   - HostKey and SplitHostKey: the politeness, partitioning and ring key of a
//     canonical URL (host plus ":port" when the port is not the default).
//
// # Who does what
//
// WHATWG parsing and resolution (scheme, authority, IPv4/IPv6 hosts, IDNA via
// golang.org/x/net/idna, default-port removal, dot segments, backslashes,
// tab/newline stripping, percent-encoding of non-ASCII and unsafe bytes) is the
// job of github.com/nlnwa/whatwg-url/url. This package adds only the steps the
// WHATWG standard does not make, because the standard keeps a URL's bytes
// wherever they might mean something to a server, while the crawler's rule
// deliberately merges variants that nearly always mean the same page:
//
//   - percent-escapes: upper-case hex; escapes of unreserved characters
//     (A-Z a-z 0-9 - . _ ~) decoded (WHATWG never decodes);
//   - ";jsessionid=..." path parameters removed (WHATWG knows no path parameters);
//   - query split on '&', empty items dropped, tracking and session items
//     (utm_*, fbclid, gclid, dclid, msclkid, mc_eid, sessionid, session_id, sid,
//     phpsessid, jsessionid) removed, items sorted by their full text, empty
//     query dropped (WHATWG's URLSearchParams would re-encode the values with
//     application/x-www-form-urlencoded rules, turning %20 into '+' and so on,
//     so the query is handled as raw text here);
//   - userinfo, fragment and one trailing dot of the host removed.
//
// # Fast path
//
// The library costs about 2.4 µs and 50 allocations per link, more than the
// whole budget (< 2 µs for resolution plus canonicalization). So references
// made only of "plain" bytes (printable ASCII without the characters WHATWG
// would percent-encode or treat specially: space, " ' < > \ ^ ` { | }) and whose
// host, if any, is a lower- or upper-case LDH name (no "xn--" label, no IP
// address, no userinfo, no percent-escape, no empty label) are resolved by a
// small resolver in this package (fast.go). For those inputs WHATWG resolution
// is plain RFC 3986 merging plus ASCII lower-casing of the host and numeric
// port parsing, so nothing of the standard is re-implemented beyond that;
// every other input goes through the library. The fuzz test checks on every
// input that both paths give the same answer.
//
// # Decisions where the written rule is silent
//
//   - A '%' not followed by two hex digits is written as "%25". WHATWG leaves it
//     alone, but then decoding a neighbouring escape could create a new escape
//     ("%%36%31" would become "%61", then "a"), and canonicalization would not
//     be idempotent.
//   - ";jsessionid=" (name case-insensitive, '=' required) is removed with its
//     value up to the next ';' or the end of the path segment, in every
//     segment. A dot segment uncovered by that removal is resolved too.
//   - A query item without '=' has the whole item as its name ("sid" alone is
//     removed); a tracking name is recognised after escape normalization, so
//     "utm%5Fsource" is removed as well.
//   - A host that still ends in '.' after one trailing dot is removed (an empty
//     DNS label) is invalid: keeping it would make canonicalization change the
//     URL again on a second pass.
//   - Length: input longer than MaxInputLength or canonical output longer than
//     MaxLength bytes is ErrInvalid; the frontier may apply a smaller limit.
//   - A Resolver is safe for concurrent use. The library initializes a URL's
//     search parameters lazily, even when the URL is only read as a base, so
//     NewResolver forces that once before the base is shared.
//   - Resolution happens against the canonical form of the base; this gives the
//     same result as resolving against the raw base and canonicalizing after,
//     because every step here commutes with WHATWG reference resolution.
package urlnorm
