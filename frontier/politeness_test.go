package frontier

import (
	"testing"
	"time"
)

// t0 is an arbitrary instant; the politeness tables count milliseconds from it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()

// at is t0 plus ms milliseconds, in unix ns.
func at(ms int64) int64 { return t0 + ms*int64(time.Millisecond) }

const ms = time.Millisecond

func TestHostDelay(t *testing.T) {
	cases := []struct {
		name   string
		own    time.Duration
		ownSet bool
		def    time.Duration
		want   time.Duration
	}{
		{"default when none set", 0, false, 1000 * ms, 1000 * ms},
		{"an unset own value is ignored", 250 * ms, false, 1000 * ms, 1000 * ms},
		{"crawl-delay overrides a longer default", 250 * ms, true, 1000 * ms, 250 * ms},
		{"crawl-delay overrides a shorter default", 5000 * ms, true, 1000 * ms, 5000 * ms},
		{"a set zero means no delay", 0, true, 1000 * ms, 0},
		{"zero default", 0, false, 0, 0},
	}
	for _, c := range cases {
		if got := hostDelay(c.own, c.ownSet, c.def); got != c.want {
			t.Errorf("%s: hostDelay(%v, %v, %v) = %v, want %v", c.name, c.own, c.ownSet, c.def, got, c.want)
		}
	}
}

func TestNextAtLease(t *testing.T) {
	cases := []struct {
		now   int64
		delay time.Duration
		want  int64
	}{
		{at(0), 1000 * ms, at(1000)},
		{at(1500), 250 * ms, at(1750)},
		{at(7), 0, at(7)},
	}
	for _, c := range cases {
		if got := nextAtLease(c.now, c.delay); got != c.want {
			t.Errorf("nextAtLease(%d, %v) = %d ms, want %d ms", c.now-t0, c.delay, (got-t0)/1e6, (c.want-t0)/1e6)
		}
	}
}

func TestNextAfterRequest(t *testing.T) {
	finished := func(msAfter int64) time.Time { return time.Unix(0, at(msAfter)) }
	cases := []struct {
		name string
		next int64 // the host's clock when the request is over
		r    requestOver
		want int64
	}{
		{
			name: "quick response: start to start wins",
			next: at(1000), r: requestOver{now: at(100), delay: 1000 * ms, perHost: 1},
			want: at(1100), // max(1000, 100+1000)
		},
		{
			name: "slow response: the delay runs after it",
			next: at(1000), r: requestOver{now: at(2500), delay: 1000 * ms, perHost: 1},
			want: at(3500),
		},
		{
			name: "the delay runs from the response's finish, not from Done",
			next: at(1000), r: requestOver{now: at(2500), finished: finished(2000), delay: 1000 * ms, perHost: 1},
			want: at(3000),
		},
		{
			name: "a finish ahead of now is honoured",
			next: at(1000), r: requestOver{now: at(2500), finished: finished(3200), delay: 1000 * ms, perHost: 1},
			want: at(4200),
		},
		{
			name: "a finish far ahead is capped at maxFinishedAhead",
			next: at(1000), r: requestOver{now: at(2500), finished: finished(3_600_000), delay: 1000 * ms, perHost: 1},
			want: at(2500 + 60_000 + 1000),
		},
		{
			name: "a finish before the clock moves nothing back",
			next: at(5000), r: requestOver{now: at(2500), finished: finished(100), delay: 1000 * ms, perHost: 1},
			want: at(5000),
		},
		{
			name: "per-host 2: start to start only",
			next: at(2000), r: requestOver{now: at(6000), delay: 1000 * ms, perHost: 2},
			want: at(2000),
		},
		{
			name: "no request: the slot goes back",
			next: at(2000), r: requestOver{now: at(1010), prevNext: at(1000), leaseNext: at(2000), noRequest: true, delay: 1000 * ms, perHost: 1},
			want: at(1000),
		},
		{
			name: "no request, but the clock moved since the lease: kept",
			next: at(2500), r: requestOver{now: at(1010), prevNext: at(1000), leaseNext: at(2000), noRequest: true, delay: 1000 * ms, perHost: 1},
			want: at(2500),
		},
		{
			name: "no request with per-host 2: the slot goes back too",
			next: at(2000), r: requestOver{now: at(1010), prevNext: at(1000), leaseNext: at(2000), noRequest: true, delay: 1000 * ms, perHost: 2},
			want: at(1000),
		},
		{
			name: "Retry-After past the delay",
			next: at(1000), r: requestOver{now: at(100), delay: 1000 * ms, perHost: 1, retryAfter: 30_000 * ms},
			want: at(30_100),
		},
		{
			name: "Retry-After shorter than the delay changes nothing",
			next: at(1000), r: requestOver{now: at(100), delay: 1000 * ms, perHost: 1, retryAfter: 500 * ms},
			want: at(1100),
		},
		{
			name: "Retry-After with per-host 2",
			next: at(2000), r: requestOver{now: at(100), delay: 1000 * ms, perHost: 2, retryAfter: 5000 * ms},
			want: at(5100),
		},
		{
			name: "Retry-After even without a request",
			next: at(2000), r: requestOver{now: at(100), prevNext: at(0), leaseNext: at(2000), noRequest: true, delay: 1000 * ms, perHost: 1, retryAfter: 700 * ms},
			want: at(800),
		},
		{
			name: "zero delay, per-host 1",
			next: at(0), r: requestOver{now: at(40), perHost: 1},
			want: at(40),
		},
	}
	for _, c := range cases {
		got := nextAfterRequest(c.next, c.r)
		if got != c.want {
			t.Errorf("%s: next = %d ms, want %d ms", c.name, (got-t0)/1e6, (c.want-t0)/1e6)
		}
	}
}

func TestDeferredUntil(t *testing.T) {
	cases := []struct {
		name      string
		next, now int64
		d         time.Duration
		want      int64
	}{
		{"pushes a clock that is due", at(0), at(10), 5000 * ms, at(5010)},
		{"never pulls a later clock in", at(9000), at(10), 5000 * ms, at(9000)},
		{"zero holds until now", at(0), at(10), 0, at(10)},
		{"zero keeps a later clock", at(20), at(10), 0, at(20)},
	}
	for _, c := range cases {
		if got := deferredUntil(c.next, c.now, c.d); got != c.want {
			t.Errorf("%s: got %d ms, want %d ms", c.name, (got-t0)/1e6, (c.want-t0)/1e6)
		}
	}
}

func TestRetryBackoff(t *testing.T) {
	const base, maxWait = 2 * time.Second, 10 * time.Minute
	cases := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0, 0},
		{1, 0.5, 1000 * ms},
		{2, 0.5, 2000 * ms},
		{3, 0.5, 4000 * ms},
		{4, 0.5, 8000 * ms},
		{3, 0.25, 2000 * ms},
		{2, 0.75, 3000 * ms},
		{9, 1, 512_000 * ms},    // 2s*2^8
		{10, 1, 600_000 * ms},   // capped
		{60, 0.5, 300_000 * ms}, // no overflow past the cap
		{0, 0.5, 1000 * ms},     // a zeroth attempt waits like the first
	}
	for _, c := range cases {
		if got := retryBackoff(c.attempt, base, maxWait, c.r); got != c.want {
			t.Errorf("retryBackoff(%d, r=%v) = %v, want %v", c.attempt, c.r, got, c.want)
		}
	}
	if got := retryBackoff(3, 0, 0, 0.9); got != 0 {
		t.Errorf("zero base and max: %v", got)
	}
}

func TestParkAsDead(t *testing.T) {
	cases := []struct {
		attempts, maxAttempts int
		park, want            bool
	}{
		{1, 5, false, false},
		{4, 5, false, false},
		{5, 5, false, true},
		{6, 5, false, true},
		{1, 5, true, true},
		{1, 1, false, true},
	}
	for _, c := range cases {
		if got := parkAsDead(c.attempts, c.maxAttempts, c.park); got != c.want {
			t.Errorf("parkAsDead(%d, %d, %v) = %v, want %v", c.attempts, c.maxAttempts, c.park, got, c.want)
		}
	}
}

func TestPollWait(t *testing.T) {
	cases := []struct {
		name      string
		now       int64
		hostNext  int64
		haveHost  bool
		retryNext int64
		want      time.Duration
	}{
		{"nothing: until woken", at(0), 0, false, 0, -1},
		{"a waiting host", at(0), at(250), true, 0, 250 * ms},
		{"a retry only", at(100), 0, false, at(1100), 1000 * ms},
		{"the retry first", at(0), at(900), true, at(300), 300 * ms},
		{"the host first", at(0), at(200), true, at(300), 200 * ms},
		{"a retry already due", at(500), 0, false, at(400), -100 * ms},
	}
	for _, c := range cases {
		if got := pollWait(c.now, c.hostNext, c.haveHost, c.retryNext); got != c.want {
			t.Errorf("%s: pollWait = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRevisitPushBack(t *testing.T) {
	cases := []struct {
		name           string
		now            int64
		delay          time.Duration
		waiting, slots int
		want           int64
		later          bool
	}{
		{"room in the queue", at(0), 1000 * ms, 3, 4, 0, false},
		{"the first past the slots waits one delay", at(0), 1000 * ms, 4, 4, at(1000), true},
		{"the third past waits three", at(500), 1000 * ms, 6, 4, at(3500), true},
		{"a host without a delay is spaced by the minimum", at(0), 0, 5, 4, at(100), true},
		{"a short delay is raised to the minimum", at(0), 20 * ms, 4, 4, at(50), true},
		{"one slot", at(0), 250 * ms, 1, 1, at(250), true},
	}
	for _, c := range cases {
		got, later := revisitPushBack(c.now, c.delay, c.waiting, c.slots)
		if later != c.later || got != c.want {
			t.Errorf("%s: revisitPushBack = %d ms, %v; want %d ms, %v", c.name, (got-t0)/1e6, later, (c.want-t0)/1e6, c.later)
		}
	}
}
