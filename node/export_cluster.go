package node

// The merge half of `crawlnode export --api`: the client has copied what each member serves
// (GET /v1/export/files) into one directory per member, laid out like a data directory
// (warc/, corpus/), and ExportMembers writes them as one output.
//
// Which record of a page wins. A URL can have records on two members, e.g. when its
// partition moved (handoff, a dead node's lease taken over) and the new owner fetched it
// again. The earliest fetch wins (ties: the member first in name order, then the first
// record read): the cluster's duplicate decision calls the first page with a text the
// original and points later copies at it, so a refetch can be marked a duplicate of the very
// page it repeats; keeping the earliest keeps the original and its decision. Duplicate and
// rejection marks are then applied to that winner as `export --data` applies them. WARC,
// CDXJ and WACZ keep every member's records: they are the raw captures, and a replay tool
// picks among captures by time itself.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
)

// ExportMembers writes the outputs copied from several members as one: dirs are the
// members' copies (each with warc/ and corpus/ as a data directory has them), in member
// name order. o.DataDir is ignored; o.Out names the output (for markdown the directory,
// which must be empty or absent; for jsonl a name ending in .zst compresses); the other
// formats are written to w. st counts as it goes (a progress display may read it between
// writes to w).
func ExportMembers(dirs []string, o ExportOptions, w io.Writer, st *ExportStats) error {
	ds := make([]*DataDir, len(dirs))
	for i, d := range dirs {
		ds[i] = &DataDir{Path: d}
	}
	switch o.Format {
	case ExportJSONL:
		return mergeJSONL(ds, o, w, st)
	case ExportMarkdown:
		return mergeMarkdown(ds, o, st)
	case ExportWARC:
		bw := bufio.NewWriterSize(w, 1<<20)
		for _, d := range ds {
			if err := exportWARC(d, bw, st); err != nil {
				return err
			}
		}
		return bw.Flush()
	case ExportCDXJ:
		return mergeCDXJ(ds, w, st)
	case ExportURLs:
		return mergeURLs(ds, w, st)
	case ExportWACZ:
		return mergeWACZ(ds, w, st)
	}
	return fmt.Errorf("%w: export format %q: want jsonl, markdown, warc, urls, cdxj or wacz", ErrBadConfig, o.Format)
}

// recordPos is where a corpus record was read: member, then its ordinal in that member's
// shards (shards in name order, lines in file order).
type recordPos struct {
	fetch  int64 // fetch time, Unix nanoseconds
	member int
	ord    int
}

func (a recordPos) before(b recordPos) bool {
	if a.fetch != b.fetch {
		return a.fetch < b.fetch
	}
	if a.member != b.member {
		return a.member < b.member
	}
	return a.ord < b.ord
}

// winners reads every member's corpus once and returns, for each URL, the position of the
// record that represents it (see the file comment). Memory: one entry per URL.
func winners(ds []*DataDir) (map[string]recordPos, error) {
	win := map[string]recordPos{}
	for m, d := range ds {
		ord := 0
		err := corpus.ReadShards(d.CorpusDir(), func(r corpus.Record) error {
			p := recordPos{fetch: r.FetchTime.UnixNano(), member: m, ord: ord}
			ord++
			if old, ok := win[r.URL]; !ok || p.before(old) {
				win[r.URL] = p
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return win, nil
}

// eachWinner calls fn for the winning record of every URL, member by member in file order,
// counting the records the options leave out as skipped.
func eachWinner(ds []*DataDir, o ExportOptions, st *ExportStats, fn func(*corpus.Record) error) error {
	win, err := winners(ds)
	if err != nil {
		return err
	}
	for m, d := range ds {
		ord := 0
		err := corpus.ReadShards(d.CorpusDir(), func(r corpus.Record) error {
			p := win[r.URL]
			mine := p.member == m && p.ord == ord
			ord++
			if !mine {
				return nil // another record of this URL represents it
			}
			if !o.keeps(&r) {
				st.Skipped++
				return nil
			}
			return fn(&r)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func mergeJSONL(ds []*DataDir, o ExportOptions, w io.Writer, st *ExportStats) error {
	return writeJSONL(o, w, st, func(emit func(*corpus.Record) error) error {
		return eachWinner(ds, o, st, emit)
	})
}

func mergeMarkdown(ds []*DataDir, o ExportOptions, st *ExportStats) error {
	return writeMarkdown(o, st, func(emit func(*corpus.Record) error) error {
		return eachWinner(ds, o, st, emit)
	})
}

// memberWARCs lists the WARC files of the members' copies by path: those copied whole and
// those of which only the index was copied (the index is all cdxj and urls need).
func memberWARCs(ds []*DataDir) ([]string, error) {
	var paths []string
	for _, d := range ds {
		names, err := readNames(d.WARCDir())
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, n := range names {
			n = strings.TrimSuffix(n, archive.IndexSuffix)
			if strings.HasSuffix(n, ".warc.gz") && !seen[n] {
				seen[n] = true
				paths = append(paths, filepath.Join(d.WARCDir(), n))
			}
		}
	}
	sort.Strings(paths)
	return paths, nil
}

func mergeCDXJ(ds []*DataDir, w io.Writer, st *ExportStats) error {
	paths, err := memberWARCs(ds)
	if err != nil {
		return err
	}
	n, err := archive.MergeIndexes(w, paths, st.indexDamage)
	st.Records += int(n)
	return err
}

// mergeURLs lists every URL once, from the merged index: its lines are sorted by SURT key
// and then capture time, so the first line of a URL within its key is its earliest capture,
// which wins. Only the URLs of one key are held in memory.
func mergeURLs(ds []*DataDir, w io.Writer, st *ExportStats) error {
	tmp, err := os.CreateTemp("", "crawlnode-urls-*.cdxj")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var ist ExportStats
	err = mergeCDXJ(ds, tmp, &ist)
	st.Damaged = append(st.Damaged, ist.Damaged...)
	if err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	fmt.Fprintln(bw, "url\tstatus\tdate\trecord\twarc_file\toffset")
	sc := bufio.NewScanner(tmp)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	lastKey := ""
	seen := map[string]bool{}
	for sc.Scan() {
		key, _, e, err := archive.ParseIndexLine(sc.Text())
		if err != nil {
			return err
		}
		if key != lastKey {
			lastKey = key
			clear(seen)
		}
		kind := "response"
		if e.Mime == "warc/revisit" {
			kind = "revisit"
		}
		if seen[e.URL] {
			continue
		}
		seen[e.URL] = true
		st.Records++
		fmt.Fprintf(bw, "%s\t%d\t%s\t%s\t%s\t%d\n", e.URL, e.Status, e.Time.UTC().Format("2006-01-02T15:04:05Z"), kind, e.Filename, e.Offset)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return bw.Flush()
}

// mergeWACZ packages every member's WARC files, their merged index and the page list;
// titles come from every member's corpus (one map entry per titled URL).
func mergeWACZ(ds []*DataDir, w io.Writer, st *ExportStats) error {
	paths, err := memberWARCs(ds)
	if err != nil {
		return err
	}
	titles := map[string]string{}
	for _, d := range ds {
		err := corpus.ReadShards(d.CorpusDir(), func(r corpus.Record) error {
			if r.Title != "" && titles[r.URL] == "" {
				titles[r.URL] = r.Title
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	ws, err := archive.WriteWACZ(w, archive.WACZOptions{
		WARCs: paths, Title: "crawlnode cluster crawl", Software: "crawlnode " + Version,
		PageTitle: func(u string) string { return titles[u] }, OnDamage: st.indexDamage,
	})
	st.Records += int(ws.IndexLines)
	return err
}
