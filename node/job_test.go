package node

import (
	"testing"

	"github.com/crawlnode/crawlnode/control"
)

// The job's max depth overrides the node's flag when it is positive or set explicitly (0:
// the seeds only); an unset 0 leaves the flag's value.
func TestEffectiveMaxDepth(t *testing.T) {
	n := &Node{cfg: Config{MaxDepth: 16, Scope: ScopeAll}}
	for _, tc := range []struct {
		job  control.JobConfig
		want int
	}{
		{control.JobConfig{}, 16},
		{control.JobConfig{MaxDepth: 3}, 3},
		{control.JobConfig{MaxDepth: 0, MaxDepthSet: true}, 0},
		{control.JobConfig{MaxDepth: 4, MaxDepthSet: true}, 4},
	} {
		e, err := n.effectiveJob(tc.job)
		if err != nil || e.MaxDepth != tc.want {
			t.Errorf("job %+v: max depth %d (err %v), want %d", tc.job, e.MaxDepth, err, tc.want)
		}
	}
	// The flag's explicit 0 stands while the job says nothing.
	n.cfg.MaxDepth, n.cfg.MaxDepthSet = 0, true
	if e, _ := n.effectiveJob(control.JobConfig{}); e.MaxDepth != 0 {
		t.Errorf("--max-depth 0 under an empty job: %d", e.MaxDepth)
	}
}
