package clustertest

import (
	"testing"
	"time"
)

// Poll intervals of Eventually: the first, doubled after each poll up to the last.
const (
	firstPoll = time.Millisecond
	maxPoll   = 10 * time.Millisecond
)

// Eventually polls cond until it holds and returns how long that took, or fails t with
// "timed out after <deadline> waiting for <what>" once deadline has passed.
func Eventually(t testing.TB, deadline time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	end := start.Add(deadline)
	for wait := firstPoll; !cond(); wait = min(2*wait, maxPoll) {
		if time.Now().After(end) {
			if cond() {
				break
			}
			t.Fatalf("timed out after %v waiting for %s", deadline, what)
		}
		time.Sleep(wait)
	}
	return time.Since(start)
}
