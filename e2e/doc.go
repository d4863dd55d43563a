// Package e2e runs the real crawlnode binary against simweb and judges it by what the
// server saw: coverage, duplicate fetches, robots and politeness violations, trap requests,
// ignored Retry-After and fetches of pages linked only through nofollow, as simweb's oracle
// reports them.
//
// Duties:
//   - Whole crawls of one node (full crawl, kill -9 and resume, corpus oracle, politeness
//     bound, recrawl freshness, priority, scope, list mode, operator controls,
//     --max-pages, seeding through the API, a full disk, the WARC files read back) and of
//     clusters of processes (three nodes, scale-out, rolling restart, the shared job
//     configuration, a node lost for good), each judged by simweb's oracle; the dashboard
//     in headless Chromium.
//   - The address guard: a loopback service the node is not allowed to reach, linked by IP
//     literal, by a name dnsmasq resolves to it and by a redirect, sees no request.
//   - The chaos suite on Docker (TestChaos: kills, pauses, a network split on four nodes)
//     and the internet regime on loopback addresses with a real DNS server (dnsmasq).
//   - The benchmarks whose figures BENCHMARKS.md reports (whole crawl, cluster scaling,
//     internet regime).
//
// Decisions:
//   - Under -race nothing runs: what is tested are processes of their own (the binary is
//     built without -race by TestMain), so the README's test command runs this package a
//     second time without -race.
//   - Tests that need a Docker engine, dnsmasq, port 80 or Chromium skip without them,
//     except where CI must have them (docs/testing.md, "What the end-to-end tests need",
//     lists each test's needs and every CRAWLNODE_* knob).
//   - This package holds only tests; this file exists so that go doc prints its duties.
package e2e
