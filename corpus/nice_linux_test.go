package corpus

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// threadStat reads field n (1-based, as proc(5) numbers them) of the calling thread's
// /proc/thread-self/stat as a number.
func threadStat(t *testing.T, n int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Skip("no /proc/thread-self:", err)
	}
	// The fields after the parenthesised command name start with field 3.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	v, err := strconv.Atoi(f[n-3])
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// threadNice is the calling thread's nice value (field 19).
func threadNice(t *testing.T) int { return threadStat(t, 19) }

// TestLowerThreadPriority: the worker's own thread gets the nice value, and no other thread
// of the process does (the goroutine stays locked to it).
func TestLowerThreadPriority(t *testing.T) {
	before := threadNice(t)
	got := make(chan int)
	go func() {
		if err := lowerThreadPriority(before + 5); err != nil {
			t.Error(err)
		}
		got <- threadNice(t)
	}()
	if n := <-got; n != before+5 {
		t.Errorf("worker thread nice %d, want %d", n, before+5)
	}
	if n := threadNice(t); n != before {
		t.Errorf("test thread nice changed to %d", n)
	}
}

// TestStageNiceWorkers: a stage whose workers run on niced threads processes its backlog and
// shuts down cleanly (the locked threads end with their goroutines).
func TestStageNiceWorkers(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	var jobs []Job
	for i := 0; i < 8; i++ {
		url := "http://h" + strconv.Itoa(i) + ".sim.test/article"
		st.add(url, genPage("Article "+strconv.Itoa(i), genParagraphs(uint64(500+i), 8, 60), pageOpts{}))
		jobs = append(jobs, jobFor(url, i))
	}
	cfg := testConfig(db, dir, st)
	cfg.Nice = 5
	runToEnd(t, cfg, jobs)
	if recs := readAll(t, dir); len(recs) != len(jobs) {
		t.Fatalf("%d records for %d jobs", len(recs), len(jobs))
	}
}

// TestIdleThreadPriority: IdleNice puts the worker's own thread, and only it, in SCHED_IDLE
// (policy, field 41 of /proc/thread-self/stat, is 5).
func TestIdleThreadPriority(t *testing.T) {
	policy := func() int { return threadStat(t, 41) }
	before := policy()
	got := make(chan int)
	go func() {
		if err := lowerThreadPriority(IdleNice); err != nil {
			t.Error(err)
		}
		got <- policy()
	}()
	if p := <-got; p != 5 {
		t.Errorf("worker thread policy %d, want 5 (SCHED_IDLE)", p)
	}
	if p := policy(); p != before {
		t.Errorf("test thread policy changed to %d", p)
	}
}
