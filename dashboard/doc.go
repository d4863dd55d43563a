// Package dashboard is the operator's live web page, embedded in the binary and served by
// every node at "/".
//
// Duties:
//   - serve one self-contained HTML page (inline CSS and vanilla JavaScript, no external
//     asset, no build step) that polls the node's JSON API every 2 s and renders the
//     cluster's members and ring, a throughput chart, the crawl figures, the top hosts by
//     queue and by errors, recent errors, dead letters and blocked domains;
//   - offer the controls pause, resume, block and unblock a domain, through the same API.
//
// Decisions where the design is silent:
//   - The page talks to the API by relative URLs only, so it works behind any prefix-free
//     proxy and never leaves the node's origin; a Content-Security-Policy with the inline
//     script's SHA-256 (computed at start) forbids every other origin and any other script.
//   - When the node runs with --api-token, open the page as /#token=TOKEN. The fragment never
//     reaches the server or its logs; the page sends it as "Authorization: Bearer TOKEN". A
//     401 shows a banner saying so.
//   - Everything crawled (URLs, error messages, host names) is untrusted: the page builds its
//     DOM with textContent, never innerHTML.
//   - Each figure has a stable element id (pages-crawled, pages-queued, in-flight,
//     retry-pending, dead-letters, crawl-rate, extract-backlog, state, ...) with the raw value
//     in data-value, and poll-count counts finished polls: tests read the page by these.
//   - Each panel fails on its own: an endpoint that errors shows "unavailable: ..." in its
//     panel while the others keep updating. Polls never overlap (the next one is scheduled
//     when the last one settles).
//
// The browser tests (here and e2e TestDashboard) drive headless Chromium through chromedp;
// subpackage browsertest starts it confined to loopback and stops it leaving no process
// behind. Nothing outside tests imports either, so the binary carries no browser code.
package dashboard
