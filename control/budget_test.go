package control

import (
	"errors"
	"testing"
)

func TestGrantSize(t *testing.T) {
	for _, tc := range []struct {
		name           string
		limit, granted int64
		members        int
		ask, want      int64
	}{
		{"no limit", 0, 0, 3, 64, 0},
		{"nothing asked", 5000, 0, 3, 0, 0},
		{"share caps a big ask", 5000, 0, 3, 5000, 834}, // ceil(5000/6)
		{"small ask whole", 5000, 0, 3, 64, 64},
		{"share shrinks with the remainder", 5000, 4900, 3, 64, 17}, // ceil(100/6)
		{"last pages one by one", 5000, 4999, 3, 64, 1},
		{"at least one while any remain", 10, 8, 5, 64, 1},
		{"remainder caps", 10, 7, 1, 64, 2}, // ceil(3/2)
		{"all given out", 5000, 5000, 3, 64, 0},
		{"limit lowered below the grants", 100, 250, 3, 64, 0},
		{"no members registered counts as one", 10, 0, 0, 64, 5},
		{"negative ask", 10, 0, 1, -1, 0},
	} {
		if got := GrantSize(tc.limit, tc.granted, tc.members, tc.ask); got != tc.want {
			t.Errorf("%s: GrantSize(%d, %d, %d, %d) = %d, want %d", tc.name, tc.limit, tc.granted, tc.members, tc.ask, got, tc.want)
		}
	}
}

// budgetState is a three-member cluster with a page limit.
func budgetState(t *testing.T, limit int64) *State {
	t.Helper()
	s := &State{}
	for _, r := range applyAll(s, member("a"), member("b"), member("c"),
		SetConfig{Config: JobConfig{MaxPages: limit}, ExpectVersion: 0, At: t0}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return s
}

// The grant arithmetic, command by command: grants never pass the limit in sum, spending
// is absolute and capped by the grant, returns give back the unspent part, a forced lease
// reclaims a dead owner's unspent grant, and bad commands change nothing.
func TestPageBudgetCommands(t *testing.T) {
	type step struct {
		cmd         Command
		wantGranted int64 // Result.Granted
		wantShare   PageBudget
		wantErr     error
	}
	for _, tc := range []struct {
		name              string
		limit             int64
		steps             []step
		wantTotal, wantSp int64
		reached           bool
	}{
		{name: "grants shrink and stop at the limit", limit: 100, steps: []step{
			{cmd: GrantPages{Node: "a", Ask: 64}, wantGranted: 17, wantShare: PageBudget{Granted: 17}}, // ceil(100/6)
			{cmd: GrantPages{Node: "b", Ask: 64}, wantGranted: 14, wantShare: PageBudget{Granted: 14}}, // ceil(83/6)
			{cmd: GrantPages{Node: "a", Spent: 17, Ask: 64}, wantGranted: 12, wantShare: PageBudget{Granted: 29, Spent: 17}},
			{cmd: GrantPages{Node: "c", Ask: 1000}, wantGranted: 10, wantShare: PageBudget{Granted: 10}},
		}, wantTotal: 53, wantSp: 17},
		{name: "spending is absolute, monotone and capped", limit: 100, steps: []step{
			{cmd: GrantPages{Node: "a", Ask: 10}, wantGranted: 10, wantShare: PageBudget{Granted: 10}},
			{cmd: GrantPages{Node: "a", Spent: 6}, wantShare: PageBudget{Granted: 10, Spent: 6}},
			{cmd: GrantPages{Node: "a", Spent: 4}, wantShare: PageBudget{Granted: 10, Spent: 6}},   // a repeat of an older report
			{cmd: GrantPages{Node: "a", Spent: 99}, wantShare: PageBudget{Granted: 10, Spent: 10}}, // never past the grant
		}, wantTotal: 10, wantSp: 10},
		{name: "a return gives back the unspent part", limit: 30, steps: []step{
			{cmd: GrantPages{Node: "a", Ask: 5}, wantGranted: 5, wantShare: PageBudget{Granted: 5}},
			{cmd: GrantPages{Node: "b", Ask: 100}, wantGranted: 5, wantShare: PageBudget{Granted: 5}}, // ceil(25/6)
			{cmd: ReturnPages{Node: "a", Spent: 2}, wantShare: PageBudget{Granted: 2, Spent: 2}},
			{cmd: ReturnPages{Node: "a", Spent: 2}, wantShare: PageBudget{Granted: 2, Spent: 2}}, // idempotent
			{cmd: ReturnPages{Node: "c"}, wantShare: PageBudget{}},                               // nothing held
		}, wantTotal: 7, wantSp: 2},
		{name: "the whole limit spent", limit: 4, steps: []step{
			{cmd: GrantPages{Node: "a", Ask: 64}, wantGranted: 1, wantShare: PageBudget{Granted: 1}},
			{cmd: GrantPages{Node: "a", Spent: 1, Ask: 64}, wantGranted: 1, wantShare: PageBudget{Granted: 2, Spent: 1}},
			{cmd: GrantPages{Node: "b", Ask: 64}, wantGranted: 1, wantShare: PageBudget{Granted: 1}},
			{cmd: GrantPages{Node: "c", Ask: 64}, wantGranted: 1, wantShare: PageBudget{Granted: 1}},
			{cmd: GrantPages{Node: "c", Spent: 1, Ask: 64}, wantGranted: 0, wantShare: PageBudget{Granted: 1, Spent: 1}},
			{cmd: ReturnPages{Node: "a", Spent: 2}, wantShare: PageBudget{Granted: 2, Spent: 2}},
			{cmd: GrantPages{Node: "b", Spent: 1}, wantShare: PageBudget{Granted: 1, Spent: 1}},
		}, wantTotal: 4, wantSp: 4, reached: true},
		{name: "a forced lease reclaims a dead owner's unspent grant", limit: 60, steps: []step{
			{cmd: GrantPages{Node: "a", Ask: 64}, wantGranted: 10, wantShare: PageBudget{Granted: 10}},
			{cmd: GrantPages{Node: "a", Spent: 4}, wantShare: PageBudget{Granted: 10, Spent: 4}},
			{cmd: AssignLeases{Moves: []LeaseMove{{Partition: 1, To: "a"}}}},
			{cmd: ForceLease{Moves: []ForcedMove{{Partition: 1, From: "a", To: "b"}}}},
		}, wantTotal: 4, wantSp: 4},
		{name: "bad commands change nothing", limit: 10, steps: []step{
			{cmd: GrantPages{Ask: 5}, wantErr: ErrInvalidCommand},
			{cmd: GrantPages{Node: "a", Ask: -1}, wantErr: ErrInvalidCommand},
			{cmd: GrantPages{Node: "a", Spent: -1, Ask: 1}, wantErr: ErrInvalidCommand},
			{cmd: ReturnPages{Node: ""}, wantErr: ErrInvalidCommand},
		}},
		{name: "no limit grants nothing", limit: 0, steps: []step{
			{cmd: GrantPages{Node: "a", Ask: 64}, wantShare: PageBudget{}},
		}},
	} {
		s := budgetState(t, tc.limit)
		for i, st := range tc.steps {
			r := s.Apply(st.cmd, s.Index+1)
			if !errors.Is(r.Err, st.wantErr) || (st.wantErr == nil && r.Err != nil) {
				t.Fatalf("%s: step %d %T: err %v, want %v", tc.name, i, st.cmd, r.Err, st.wantErr)
			}
			if r.Granted != st.wantGranted {
				t.Errorf("%s: step %d: granted %d, want %d", tc.name, i, r.Granted, st.wantGranted)
			}
			switch st.cmd.(type) {
			case GrantPages, ReturnPages:
				if st.wantErr == nil && (r.Budget == nil || *r.Budget != st.wantShare) {
					t.Errorf("%s: step %d: share %+v, want %+v", tc.name, i, r.Budget, st.wantShare)
				}
			}
		}
		g, sp := s.BudgetTotals()
		if g != tc.wantTotal || sp != tc.wantSp || g > max(tc.limit, 0) && tc.limit > 0 {
			t.Errorf("%s: totals granted %d spent %d, want %d %d (limit %d)", tc.name, g, sp, tc.wantTotal, tc.wantSp, tc.limit)
		}
		if s.PageLimitReached() != tc.reached {
			t.Errorf("%s: limit reached %v, want %v", tc.name, s.PageLimitReached(), tc.reached)
		}
	}
}

// A long run of asks from three members never grants past the limit and gives out all of it.
func TestPageBudgetNeverOvershoots(t *testing.T) {
	for _, limit := range []int64{1, 7, 100, 5000} {
		s := budgetState(t, limit)
		spent := map[string]int64{}
		for i := 0; i < 10000; i++ {
			node := []string{"a", "b", "c"}[i%3]
			r := s.Apply(GrantPages{Node: node, Spent: spent[node], Ask: 32}, s.Index+1)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			spent[node] = r.Budget.Granted // spend it all
		}
		g, _ := s.BudgetTotals()
		if g != limit {
			t.Errorf("limit %d: granted %d in all", limit, g)
		}
	}
}

func TestPageBudgetEncodeAndClone(t *testing.T) {
	for _, cmd := range []Command{GrantPages{Node: "a", Spent: 3, Ask: 9}, ReturnPages{Node: "b", Spent: 2}} {
		b, err := Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(b)
		if err != nil || back != cmd {
			t.Fatalf("%T round trip: %+v %v", cmd, back, err)
		}
	}
	s := budgetState(t, 10)
	s.Apply(GrantPages{Node: "a", Ask: 2}, s.Index+1)
	c := s.Clone()
	c.Budget["a"] = PageBudget{Granted: 99}
	if s.Budget["a"].Granted != 2 {
		t.Fatal("Clone shares the budget map")
	}
}
