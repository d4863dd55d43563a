// Package clustertest holds the helpers that tests of the cluster's parts share.
//
// Duties:
//   - Eventually: wait for a condition the code under test reaches on its own (a member
//     joins, a lease moves, an outbox drains) by polling it, and fail with what was
//     awaited and for how long when it does not hold in time. Tests wait this way, never
//     with bare sleeps (STYLE.md, "A synchronous test cluster").
//
// Decisions where the design is silent:
//   - Polls back off from 1 ms to 10 ms: a condition that holds at once costs almost
//     nothing, and a long wait polls at most a hundred times a second, as the loops this
//     replaced did (every 2 to 10 ms).
//   - The condition is checked once more after the deadline passes, so a wait that ends
//     just as the condition comes true passes.
//   - It fails the test with t.Fatalf, from the test's goroutine only, as testing requires.
package clustertest
