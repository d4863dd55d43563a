package corpus

import (
	"testing"
)

// TestStagePayloadOf: a page whose identical payload another node archived (a WARC revisit
// record here, Job.PayloadOf) is not read back: its record is an exact duplicate of that
// URL, with no text, and it enters no duplicate index (the page with its text does).
func TestStagePayloadOf(t *testing.T) {
	db := openMemDB(t)
	dir := t.TempDir()
	st := newSite()
	paras := genParagraphs(5, 6, 60)
	st.add("http://c.sim.test/", genPage("Same", paras, pageOpts{}))
	cfg := testConfig(db, dir, st)
	cfg.Workers = 1
	rv := jobFor("http://b.sim.test/copy", 1)
	rv.WARCFile, rv.WARCOffset, rv.PayloadOf = "", 0, "http://a.sim.test/orig"
	runToEnd(t, cfg, []Job{rv, jobFor("http://c.sim.test/", 2)})
	recs := readAll(t, dir)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(recs), recs)
	}
	r := recs[0]
	if r.URL != "http://b.sim.test/copy" || r.DuplicateOf != "http://a.sim.test/orig" || r.DuplicateKind != DupExact || r.Text != "" || r.Rejected != "" {
		t.Errorf("revisit's record: %+v", r)
	}
	if st.loads["http://b.sim.test/copy"] != 0 {
		t.Errorf("the revisit was read back %d times", st.loads["http://b.sim.test/copy"])
	}
	// The page after it with text is an original: the revisit entered no index.
	if recs[1].DuplicateOf != "" || recs[1].Text == "" {
		t.Errorf("page after the revisit: %+v", recs[1])
	}
}
