package frontier

import "testing"

// MaxDepth 0 with MaxDepthSet admits depth-0 candidates only (list mode), at Open and
// through SetLimits; without MaxDepthSet a 0 still means the default, 16.
func TestMaxDepthZero(t *testing.T) {
	check := func(f *Frontier, depth int, want string) {
		t.Helper()
		r := mustAdd(t, f, Candidate{URL: "http://a.test/d" + string(rune('a'+depth)), Depth: depth})
		if got := r.Rejected[RejectMaxDepth] > 0; got != (want == RejectMaxDepth) {
			t.Errorf("depth %d: result %+v, want rejection %q", depth, r, want)
		}
	}
	f := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true, MaxDepthSet: true})
	check(f, 0, "")
	check(f, 1, RejectMaxDepth)

	d := openF(t, Config{DB: openDB(t, ""), DefaultDelaySet: true})
	check(d, 16, "")
	check(d, 17, RejectMaxDepth)
	d.SetLimits(Limits{PerHost: 1}) // MaxDepth 0 without MaxDepthSet leaves the limit
	check(d, 15, "")
	d.SetLimits(Limits{PerHost: 1, MaxDepthSet: true})
	check(d, 0, "")
	check(d, 1, RejectMaxDepth)
	d.SetLimits(Limits{PerHost: 1, MaxDepth: 2})
	check(d, 2, "")
	check(d, 3, RejectMaxDepth)
}
