package corpus

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/crawlnode/crawlnode/internal/keyspace"
)

// prefixPage: 'u' <sha256(url)[:16]> -> the page's latest Record without its text and
// Markdown (JSON).
// The text is not stored twice: it is derived again from the WARC record on request, so the
// per-page cost in Badger stays a few hundred bytes.
const prefixPage = keyspace.CorpusPage

func pageKey(url string) []byte {
	h := sha256.Sum256([]byte(url))
	k := make([]byte, 1+16)
	k[0] = prefixPage
	copy(k[1:], h[:16])
	return k
}

// ErrNoPage means the stage has no record for that URL (not fetched, not HTML, or not yet
// extracted).
var ErrNoPage = errors.New("corpus: no record for that page")

// pageMeta returns the metadata line stored for a record: the record without its text.
func pageMeta(rec *Record) ([]byte, error) {
	m := *rec
	m.Text, m.Markdown = "", ""
	return json.Marshal(&m)
}

// Page returns the stage's latest record for url: its metadata as written to the corpus
// (duplicate_of, rejection, quality signals, WARC location) and, when withText is set and
// the page was not rejected before extraction, its main text extracted again from the
// stored page through Config.Load (the same extractor, so the same text).
func (s *Stage) Page(ctx context.Context, url string, withText bool) (Record, error) {
	var rec Record
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(pageKey(url))
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error { return json.Unmarshal(v, &rec) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return rec, ErrNoPage
	}
	if err != nil {
		return rec, fmt.Errorf("corpus: page lookup: %w", err)
	}
	if !withText || rec.WARCFile == "" {
		return rec, nil
	}
	if rec.Rejected != "" && rec.Quality.TextLength == 0 {
		return rec, nil
	}
	j := Job{URL: rec.URL, FetchTime: rec.FetchTime, Status: rec.Status, ContentType: rec.ContentType,
		WARCFile: rec.WARCFile, WARCOffset: rec.WARCOffset, WARCLength: rec.WARCLength, TDMPolicy: rec.TDMPolicy}
	body, err := s.cfg.Load(ctx, j)
	if err != nil {
		return rec, fmt.Errorf("corpus: load page: %w", err)
	}
	ex := *s.extractor
	ex.filters.IncludeOptOut = true // the caller asked for this page; opt-out is in rec.OptOut
	a := ex.analyze(&j, body)
	rec.Text, rec.Markdown = a.rec.Text, a.rec.Markdown
	if rec.Title == "" {
		rec.Title = a.rec.Title
	}
	return rec, nil
}
