package frontier

import "time"

// The arithmetic of a host's politeness clock and of retries, as pure functions over
// values: times in unix nanoseconds are passed in, randomness is passed in as a float in
// [0,1). The frontier's locked code calls these and nothing else decides a host's next
// allowed time or a URL's retry; politeness_test.go holds them against tables, to the
// millisecond, without a clock or Badger.

// hostDelay is the gap between two requests to a host: its own delay (robots Crawl-delay,
// through SetHostDelay; 0 allowed) when one was set, else the frontier's default.
func hostDelay(own time.Duration, ownSet bool, def time.Duration) time.Duration {
	if ownSet {
		return own
	}
	return def
}

// nextAtLease is a host's next allowed time once a URL of it is leased at now: start to
// start, now plus its delay.
func nextAtLease(now int64, delay time.Duration) int64 {
	return now + int64(delay)
}

// requestOver is what the politeness clock needs to know when a lease's request is over
// (Release, or Done without Release).
type requestOver struct {
	now int64 // unix ns: when the frontier heard of it
	// prevNext and leaseNext are the host's next allowed time before and after the lease
	// was issued; a lease that sent no request gives its slot back only while the clock
	// still stands where that lease left it.
	prevNext, leaseNext int64
	delay               time.Duration // the host's delay (hostDelay)
	perHost             int           // Config.PerHost
	// The Outcome's politeness fields.
	noRequest  bool
	finished   time.Time // zero: unknown, the request ended at now
	retryAfter time.Duration
}

// maxFinishedAhead bounds how far past Done an Outcome's Finished may move the host's
// politeness clock.
const maxFinishedAhead = time.Minute

// nextAfterRequest is the host's next allowed time, now next, once a lease's request is
// over: back to where it was before the lease when no request was sent (and nothing moved
// the clock since), else, with PerHost 1, at least the delay past the end of the response
// (Finished, at most maxFinishedAhead past now); RetryAfter then pushes it to at least
// now+RetryAfter (any outcome, host-wide).
func nextAfterRequest(next int64, r requestOver) int64 {
	switch {
	case r.noRequest:
		if next == r.leaseNext {
			next = r.prevNext
		}
	case r.perHost == 1:
		end := r.now
		if !r.finished.IsZero() {
			end = min(end+int64(maxFinishedAhead), r.finished.UnixNano())
		}
		next = max(next, end+int64(r.delay))
	}
	if r.retryAfter > 0 {
		next = deferredUntil(next, r.now, r.retryAfter)
	}
	return next
}

// deferredUntil is a host's next allowed time once something holds it for d from now
// (DeferHost: robots.txt answered 5xx; Retry-After of a 429/503): never earlier than it
// already was.
func deferredUntil(next, now int64, d time.Duration) int64 {
	return max(next, now+int64(d))
}

// retryBackoff is the wait before retry number attempt (1 for the first failure): full
// jitter, r (in [0,1)) times min(max, base*2^(attempt-1)).
func retryBackoff(attempt int, base, maxWait time.Duration, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return time.Duration(r * float64(d))
}

// parkAsDead says whether a transient failure that brought a URL to attempts failed
// attempts parks it as a dead letter (the maxAttempts-th failure, or the caller said so)
// rather than scheduling a retry.
func parkAsDead(attempts, maxAttempts int, park bool) bool {
	return attempts >= maxAttempts || park
}

// pollWait is how long Next waits when nothing is ready at now: until the earliest
// waiting host's next allowed time or the earliest retry due (0: none, or its move is
// already running), whichever comes first; -1 when neither exists (until woken).
func pollWait(now int64, hostNext int64, haveHost bool, retryNext int64) time.Duration {
	wait := time.Duration(-1)
	if haveHost {
		wait = time.Duration(hostNext - now)
	}
	if retryNext != 0 {
		if rw := time.Duration(retryNext - now); wait < 0 || rw < wait {
			wait = rw
		}
	}
	return wait
}

// mergeHost is the more cautious of two host states: the later next-allowed time, the
// longer delay when both set one (else the one set), the larger counters.
func mergeHost(local, imported hostRec) hostRec {
	m := local
	m.Next = max(local.Next, imported.Next)
	switch {
	case local.DelaySet && imported.DelaySet:
		m.Delay = max(local.Delay, imported.Delay)
	case imported.DelaySet:
		m.DelaySet, m.Delay = true, imported.Delay
	}
	m.Admitted = max(local.Admitted, imported.Admitted)
	m.Generated = max(local.Generated, imported.Generated)
	return m
}

// revisitPushBack decides where a revisit that came due at now goes when waiting
// revisits of its host already wait in its queue: at most slots of them wait there
// (room for new URLs, bounded memory); the others get a later due time, by the host's
// pace, one delay (at least minRevisitStep) per place in the line past the slots. It
// returns the new due time and true, or false when the revisit joins the queue now.
func revisitPushBack(now int64, delay time.Duration, waiting, slots int) (int64, bool) {
	if waiting < slots {
		return 0, false
	}
	step := int64(max(delay, minRevisitStep))
	return now + step*int64(waiting-slots+1), true
}

// minRevisitStep is the least spacing of pushed-back revisits of one host (a host
// without a delay).
const minRevisitStep = 50 * time.Millisecond
