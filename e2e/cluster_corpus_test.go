package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/corpus"
)

// TestClusterCorpus: three members crawl the corpus web (mirrors and near copies planted
// on hosts that different members own) with extraction on. Judged from the shards on the
// three disks and simweb's oracle: every must-reach page has exactly one record across
// the nodes, the duplicate marks score precision and recall >= 0.95 on the planted pairs,
// copies fetched by different members are found, and one node crawling the same web finds
// the same duplicate groups, each with one original.
func TestClusterCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl")
	}
	w, addr := web(t, corpusWeb)
	exactGroups, nearGroups := w.ExactDuplicateGroups(), w.NearDuplicateGroups()
	args := slices.DeleteFunc(clusterArgs(addr, 0, 30*time.Second), func(a string) bool { return a == "--no-extract" })
	cr := newClusterRun(t, args)
	start := time.Now()
	cr.addThree(seedsFile(t, w))
	cr.waitAll(8 * time.Minute)
	rep := w.Report(reportOptions(0))
	checkClean(t, rep, logDuplicates(t, w, rep))
	t.Logf("3 nodes crawled and extracted in %s", time.Since(start).Round(time.Millisecond))

	byURL, nodeOf, total := map[string][]*corpus.Record{}, map[string]string{}, 0
	for _, n := range cr.nodes {
		err := corpus.ReadShards(filepath.Join(n.data, "corpus"), func(r corpus.Record) error {
			u := canon(r.URL)
			byURL[u] = append(byURL[u], &r)
			nodeOf[u] = n.name
			total++
			return nil
		})
		if err != nil {
			t.Fatalf("%s: read corpus: %v", n.name, err)
		}
	}
	t.Run("records", func(t *testing.T) { checkRecords(t, w, byURL, total) })
	t.Run("duplicates", func(t *testing.T) { checkDuplicates(t, w, byURL, exactGroups, nearGroups) })
	// Copies fetched by different members: every planted pair whose two pages have their
	// records on different nodes must be in one duplicate group.
	clusterGroups := dupGroups(byURL)
	crossPairs, crossFound := 0, 0
	for _, g := range append(slices.Clone(exactGroups), nearGroups...) {
		for i := range g {
			for j := i + 1; j < len(g); j++ {
				a, b := canon(g[i]), canon(g[j])
				ra, rb := byURL[a], byURL[b]
				if len(ra) == 0 || len(rb) == 0 || ra[0].Rejected != "" || rb[0].Rejected != "" || nodeOf[a] == nodeOf[b] {
					continue
				}
				crossPairs++
				if ga := clusterGroups[a]; ga != "" && ga == clusterGroups[b] {
					crossFound++
				}
			}
		}
	}
	t.Logf("planted pairs fetched by two different members: %d, found %d", crossPairs, crossFound)
	if crossPairs == 0 || float64(crossFound) < 0.95*float64(crossPairs) {
		t.Errorf("cross-member pairs: %d planted, %d found (want >= 0.95)", crossPairs, crossFound)
	}

	// The same web crawled by one node.
	w1, addr1 := web(t, corpusWeb)
	data := filepath.Join(t.TempDir(), "single")
	c := startCrawler(t, crawlArgs(data, addr1, w1, t)...)
	if code := c.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("single node exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	single := map[string][]*corpus.Record{}
	if err := corpus.ReadShards(filepath.Join(data, "corpus"), func(r corpus.Record) error {
		single[canon(r.URL)] = append(single[canon(r.URL)], &r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	singleGroups := dupGroups(single)
	oneOriginal(t, "cluster", clusterGroups, byURL)
	oneOriginal(t, "single node", singleGroups, single)
	// Which trap pages (outside must-reach) fit a trap's budget depends on crawl order:
	// the groups are compared on the must-reach pages both crawls have.
	must := map[string]bool{}
	for _, u := range w.MustReach(reportOptions(0)) {
		must[canon(u)] = true
	}
	compareGroups(t, onlyMust(clusterGroups, must), onlyMust(singleGroups, must))
}

// onlyMust keeps the must-reach pages of groups, each group cut down to its must-reach
// members (a group left with one page is no group).
func onlyMust(groups map[string]string, must map[string]bool) map[string]string {
	out := map[string]string{}
	for u, g := range groups {
		if !must[u] {
			continue
		}
		var kept []string
		for _, m := range strings.Fields(g) {
			if must[m] {
				kept = append(kept, m)
			}
		}
		if len(kept) > 1 {
			out[u] = strings.Join(kept, " ")
		}
	}
	return out
}

// oneOriginal: every duplicate group has exactly one page that is no duplicate.
func oneOriginal(t *testing.T, who string, groups map[string]string, byURL map[string][]*corpus.Record) {
	t.Helper()
	originals := map[string]int{}
	for u, g := range groups {
		if recs := byURL[u]; len(recs) > 0 && recs[0].DuplicateOf == "" {
			originals[g]++
		} else if len(recs) == 0 {
			t.Errorf("%s: %s is in a duplicate group but has no record", who, u)
		}
	}
	bad := 0
	for _, g := range groups {
		if originals[g] != 1 {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d pages are in groups without exactly one original", who, bad)
	}
}

// dupGroups maps every page in a duplicate group (url -> duplicate_of components) to its
// group, as its sorted members joined, and checks nothing: compareGroups does.
func dupGroups(byURL map[string][]*corpus.Record) map[string]string {
	uf, all := unionFind{}, map[string]bool{}
	for u, recs := range byURL {
		if d := recs[0].DuplicateOf; d != "" {
			uf.union(u, canon(d))
			all[u], all[canon(d)] = true, true
		}
	}
	members := map[string][]string{}
	for u := range all {
		members[uf.find(u)] = append(members[uf.find(u)], u)
	}
	out := map[string]string{}
	for _, m := range members {
		slices.Sort(m)
		key := strings.Join(m, " ")
		for _, u := range m {
			out[u] = key
		}
	}
	return out
}

// compareGroups: the cluster's duplicate groups are the single node's.
func compareGroups(t *testing.T, cluster, single map[string]string) {
	t.Helper()
	var differ []string
	for u, g := range cluster {
		if single[u] != g {
			differ = append(differ, u)
		}
	}
	for u := range single {
		if _, ok := cluster[u]; !ok {
			differ = append(differ, u)
		}
	}
	slices.Sort(differ)
	groups := map[string]bool{}
	for _, g := range cluster {
		groups[g] = true
	}
	t.Logf("duplicate groups: cluster %d groups over %d pages, single node %d pages; pages grouped differently %d",
		len(groups), len(cluster), len(single), len(differ))
	if len(differ) > 0 {
		for _, u := range first(differ, 5) {
			t.Logf("%s: cluster group [%s], single-node group [%s]", u, cluster[u], single[u])
		}
		t.Errorf("%d pages are grouped differently by the cluster and by one node", len(differ))
	}
}
