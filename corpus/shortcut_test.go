package corpus

import (
	"os"
	"slices"
	"testing"
)

// TestRealWorldShortcut holds the shortcut (doc.go, "The shortcut") to go-trafilatura's
// real-world comparison pages: a page goes through the full path (extraction always run, then
// the filters), which also says whether the stage would have skipped it, and a skip must only
// ever hit a page the full path rejects. With -race the whole set takes minutes, so by default
// a sample runs: every 8th page and the 2% smallest (where pages without text are);
// CORPUS_REALWORLD=all runs every page. It also counts how often the dropped shortcuts (page
// link density, visible text < MinTextLength/2) would have dropped a page the full path keeps.
func TestRealWorldShortcut(t *testing.T) {
	pages := loadRealPages(t)
	sample := make([]bool, len(pages))
	bySize := make([]int, len(pages))
	for i := range pages {
		bySize[i] = i
		sample[i] = i%8 == 0 || os.Getenv("CORPUS_REALWORLD") == "all"
	}
	slices.SortFunc(bySize, func(a, b int) int { return len(pages[a].body) - len(pages[b].body) })
	for _, i := range bySize[:len(pages)/50] {
		sample[i] = true
	}
	ex := testExtractor(Filters{})
	n, kept, skipped, wrong := 0, 0, 0, 0
	oldDensity, oldShort, overBound := 0, 0, 0
	for i := range pages {
		if !sample[i] {
			continue
		}
		p := &pages[i]
		j := realJob(p)
		a := ex.analyzeFull(&j, p.body)
		n++
		if a.rec.Rejected == "" {
			kept++
		}
		if a.shortcut {
			skipped++
			if a.rec.Rejected == "" {
				wrong++
				t.Errorf("%s (%s): skipped, but the full path keeps it", p.url, p.file)
			}
		}
		if a.rec.Rejected == "" {
			q := a.rec.Quality
			if q.VisibleChars > 0 && float64(a.pageLinkChars)/float64(q.VisibleChars) > ex.filters.MaxLinkDensity {
				oldDensity++
			}
			if 2*q.VisibleChars < ex.filters.MinTextLength && !a.jsonLD {
				oldShort++
			}
		}
		if !a.jsonLD && a.rec.Quality.TextLength > 2*a.reach-1 {
			overBound++
		}
	}
	agree := 1 - float64(wrong)/float64(n)
	t.Logf("%d of %d pages, %d kept by the full path; shortcut: %d skipped, %d of them kept by the full path; agreement %.4f",
		n, len(pages), kept, skipped, wrong, agree)
	t.Logf("the dropped shortcuts would have lost: page link density > %.2f: %d pages; visible text < MinTextLength/2: %d; main text over 2*reach-1 characters (no JSON-LD): %d",
		ex.filters.MaxLinkDensity, oldDensity, oldShort, overBound)
	if agree < 0.995 {
		t.Errorf("skip and full decisions agree on %.4f of pages, want >= 0.995", agree)
	}
}
