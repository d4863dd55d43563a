package node

import (
	"errors"
	"io"
	"path/filepath"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
)

// indexDamage records a damaged WARC file whose index lines stop at the damage.
func (st *ExportStats) indexDamage(path string, err error) {
	d := archive.Damage{File: path, Resume: -1, Err: err}
	errors.As(err, &d)
	st.damaged(d)
}

// exportCDXJ writes the merged, sorted CDXJ index of every WARC file (see
// archive.MergeIndexes); a damaged file is indexed up to the damage and reported.
func exportCDXJ(dir *DataDir, w io.Writer, st *ExportStats) error {
	files, err := warcFiles(dir)
	if err != nil {
		return err
	}
	n, err := archive.MergeIndexes(w, files, st.indexDamage)
	st.Records += int(n)
	return err
}

// exportWACZ packages the WARC files, their index and the list of HTML pages as WACZ; page
// titles come from the corpus (a map of URL to title, the one thing held in memory).
func exportWACZ(dir *DataDir, w io.Writer, st *ExportStats) error {
	files, err := warcFiles(dir)
	if err != nil {
		return err
	}
	titles := map[string]string{}
	err = corpus.ReadShards(dir.CorpusDir(), func(r corpus.Record) error {
		if r.Title != "" {
			titles[r.URL] = r.Title
		}
		return nil
	})
	if err != nil {
		return err
	}
	ws, err := archive.WriteWACZ(w, archive.WACZOptions{
		WARCs: files, Title: "crawlnode crawl " + filepath.Base(dir.Path), Software: "crawlnode " + Version,
		PageTitle: func(u string) string { return titles[u] }, OnDamage: st.indexDamage,
	})
	st.Records += int(ws.IndexLines)
	return err
}
