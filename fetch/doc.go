// Package fetch is Crawlnode's HTTP layer: one GET at a time, bounded in
// every dimension, recorded byte for byte for WARC, and robots.txt.
//
// # Duties
//
//   - Client.Do: an HTTP/1.1 GET with a connect timeout, a first-byte
//     timeout and a whole-request deadline; a body limit (cut, flagged
//     Truncated, never an error); gzip/deflate/br decoding under the same
//     limit; conditional GET; Retry-After, Location, ETag, Last-Modified;
//     the content kind (HTML to parse, robots, sitemap, other to record).
//   - Redirects are returned, never followed (the crawl loop enqueues the
//     target as a new URL), except by FetchRobots, which follows up to 5.
//   - --resolve overrides (exact names and "*.suffix") and a DNS cache with
//     TTL, negative caching, a size bound and collapsed concurrent lookups.
//   - Robots: RFC 9309 via grobotstxt's tokenizer and matching semantics,
//     parsed once per host, Crawl-delay, Sitemap lines, status handling,
//     expiry and a binary form for the host state.
//   - The address guard: every connection's address, after DNS and for IP-literal URLs
//     alike, is checked before it is dialed; loopback, private, link-local, shared,
//     multicast, reserved and unspecified addresses (and the IPv6 forms that embed them)
//     fail with ErrForbiddenAddress unless Config.AllowIPs holds them.
//   - Failures as classified errors (Classify, IsTransient), each wrapping
//     a sentinel; a hostile server costs at most Timeout and MaxBodySize.
//
// # Decisions where the design is silent
//
// fasthttp is used for what it is good at: HostClient per scheme+host:port
// is the connection pool (MaxConnsPerHost, waiting for a free connection,
// idle cleanup, lazy TLS with SNI from the URL's host) and calls our dial
// (Resolve rules, then IP literals, then the DNS cache). The request and
// response bytes on a connection are handled here instead of by
// fasthttp's Request/Response, because WARC needs the exact bytes
// (fasthttp re-serializes headers and strips chunking), because the body
// must be cut at MaxBodySize rather than fail (fasthttp's limit is an
// error, its streaming mode hides the raw framing), and because the first-
// byte timeout can then be exact: the read deadline is
// min(now+FirstByteTimeout, deadline) until one byte arrives, then the
// whole-request deadline. The parser is small (status line, fields,
// obs-fold, 1xx skipping, Content-Length / chunked / read-to-close framing
// per RFC 9112 section 6.3, trailers) and table-tested.
//
//   - RawHeader is the header block as received, except that
//     Transfer-Encoding lines are removed when the body was de-chunked, so
//     that RawHeader+RawBody form a consistent message for WARC.
//   - A connection is reused only when the response was read completely
//     and framed (not read-to-close, not truncated, no Connection: close,
//     nothing unsolicited buffered). A request that fails on a reused
//     connection before any response byte (the server closed it while
//     idle) is retried once on a fresh connection.
//   - Context cancellation sets the connection's deadline to the past
//     (context.AfterFunc, no goroutine per request) and closes it; waiting
//     for a pooled connection and dialing are bounded by Timeout and
//     ConnectTimeout, not by the context.
//   - Corrupt Content-Encoding is not a transport error: the Response is
//     returned with DecodeErr set (so the raw bytes can still be archived),
//     empty Body and KindOther.
//   - Content kind is independent of the status (a 404 HTML page is
//     KindHTML). Declared HTML that sniffs as binary (PDF, image, NULs) is
//     KindOther; an undeclared type is sniffed. Sitemaps are recognized by
//     an XML body with <urlset>/<sitemapindex>; a gzip file sitemap
//     (*.gz or application/gzip) is uncompressed into Body (RawBody stays
//     as received). Text sitemaps and feeds are KindOther for now.
//   - Errors: "dns" for failed lookups (transient unless NXDOMAIN), "connect"
//     for refused/unreachable/connect timeout, "timeout" for the first-byte
//     and whole-request deadlines, "reset" for resets and for connections
//     closed before the response was complete (short body, EOF in headers),
//     "protocol" for malformed HTTP, "too_large_header", "tls", "canceled",
//     "bad_url", "forbidden_address" (not transient: nothing was sent).
//   - The address guard (guard.go) sits in the dialer, so it sees the address actually
//     dialed: each DNS answer (a name that rebinds to 127.0.0.1 between two requests is
//     refused at its next dial; a kept-alive connection to the name's old address is not
//     reused once the name moved), and IP literals, which skip DNS. Pages, robots.txt and
//     each of its redirect hops, sitemaps, /.well-known/tdmrep.json and redirect targets
//     (new URLs for the crawl loop) all dial through it. Of a name's addresses the refused
//     ones are skipped and the others tried; only when none is left does the request fail
//     with "forbidden_address". A robots.txt redirect to a refused address is not followed
//     and the chain ends at that 3xx (unavailable, like an unusable Location). --resolve
//     targets are not checked: the operator named them. The table is written here, one
//     row per block with its RFC: net/netip's IsPrivate, IsLoopback and the like miss
//     shared address space, benchmarking, documentation, class E, 192.0.0.0/24 and the
//     IPv6 forms that embed an IPv4 address (NAT64, 6to4, Teredo); hashicorp/go-sockaddr,
//     already in go.sum through memberlist, has RFC tables but as net.IPNet (allocations,
//     ~µs a check), without the registry's "globally reachable" choice and without the
//     recent blocks (3fff::/20, 5f00::/16). The rows are the IANA special-purpose
//     registries' blocks that are not globally reachable, plus multicast and 240/4; for
//     IPv6 everything outside 2000::/3 (the only global unicast allocation) is reserved.
//     IPv4-compatible addresses (::a.b.c.d, deprecated) are refused whatever they embed;
//     IPv4-mapped, NAT64 and 6to4 take the class of the IPv4 address they embed, Teredo the
//     refused one of its server and client. A check costs 40-160 ns with no allocation
//     (BenchmarkGuardCheck), against a connect's syscalls.
//   - DNS: with DNSServers (--dns) a DNSClient (miekg/dns) asks those servers
//     directly and the cache keeps each answer for its own TTL (the smallest
//     in the CNAME chain), capped at DNSCacheTTL; NXDOMAIN and NODATA for the
//     SOA's negative TTL (RFC 2308), capped at NegativeTTL; SERVFAIL, REFUSED
//     and timeouts (temporary, so the URL is retried) for NegativeTTL. The
//     stdlib resolver, used without DNSServers, reports no TTL, so DNSCacheTTL
//     is its TTL. A is asked first, AAAA only when a name has no A record.
//     Every request consults the cache (not only a new connection), so a name
//     whose TTL ran out is asked again while its connection stays alive, and a
//     kept-alive connection to an address the name no longer has is closed.
//     Client.DNSStats counts lookups, hits, shared and sent queries. Failures are
//     cached for NegativeTTL; a lookup cut short by its caller is not
//     cached. When the cache is full, expired entries go first, then an
//     arbitrary eighth (map order): cheaper than LRU, and a dropped name
//     costs one lookup. Each address of a name is tried in turn.
//   - Robots: grobotstxt.AgentAllowed re-parses the file on every call
//     (27-90 µs and 385 allocations for a 60-rule file, measured); here the
//     file is tokenized once by grobotstxt.Parse into directives and the
//     matcher replays grobotstxt's RobotsMatcher rules on them (about 1 µs,
//     no allocations), with a linear-time wildcard matcher. Differential
//     tests hold both against grobotstxt. One grobotstxt bug is repaired:
//     it corrupts lower-case percent escapes in patterns ("%c3" arrives as
//     "%C\x13").
//   - Robots statuses (RFC 9309 2.3.1): 2xx parse; 3xx left after 5
//     redirects and 4xx allow all ("unavailable", as Google does); 429 and
//     5xx (and any other status) disallow all and report Unreachable, as do
//     transport failures (UnreachableRobots). 2xx/4xx verdicts live 24 h,
//     unreachable ones 1 min (RobotsRetryTTL), after which the caller
//     fetches again; the caller owns "robots before any other URL of the
//     host", scheduling and backoff.
//   - The robots body is cut at 500 KiB at the last line end before the
//     cap, so that a half line cannot become a shorter, broader rule.
//   - Crawl-delay: grobotstxt does not expose it; the groups are rebuilt
//     with grobotstxt's grouping rules (consecutive user-agent lines form a
//     group; only Allow/Disallow end it) and the delay comes from the
//     product token's own group if it has one, else from "*"; the largest
//     value in the group wins; capped at 60 s (MaxCrawlDelay).
//   - Sitemap: lines must be absolute http(s) URLs; duplicates dropped; at
//     most 1000 kept.
//   - Allowed and CrawlDelay match the product token of the user agent
//     passed ("crawlnode/0.1 (...)" matches "User-agent: crawlnode").
//   - fasthttp starts one idle-connection cleaner goroutine per host with
//     open connections; it exits within MaxIdleConnDuration after the last
//     connection closes (Client.Close closes idle ones). Tests of other
//     packages use FastTestConfig (50 ms) or ignore FasthttpCleanerFunc.
//   - HostClients of hosts without connections are forgotten after
//     MaxIdleConnDuration once more than 1024 hosts are known, so memory does
//     not grow with every host ever crawled.
package fetch
