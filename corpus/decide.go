package corpus

import (
	"context"
	"time"
)

// DedupPage is one page whose duplicate decision is asked of a Decider.
type DedupPage struct {
	// Ref names the page: "<url>\t<fetch time ns>", so a page redone after a crash finds
	// itself and stays the original.
	Ref     string
	Hash    []byte // SHA-256 of NormalizeText(text)
	SimHash uint64
	// Refetch: the page replaces any earlier capture of its own URL (Job.Refetch: not a
	// revisit): a key naming the same URL at another fetch time is a lost capture, not an
	// original it duplicates.
	Refetch bool
}

// DedupVerdict is a Decider's answer for one page. Of is empty for an original; else the
// Ref of the page it duplicates, Kind DupExact or DupNear, Distance the fingerprints'
// Hamming distance (near only).
type DedupVerdict struct {
	Of       string
	Kind     string
	Distance int
}

// Decider decides, for a batch of pages in order, which are originals and which duplicate
// an earlier page. It keeps the same rules as the stage's own indexes: the first page with
// a text is the original; only originals enter the indexes; a page that finds itself is
// the original. An error decides nothing that the pages cannot ask again: a repeated call
// for the same pages gives the same answers.
type Decider interface {
	Decide(ctx context.Context, pages []DedupPage) ([]DedupVerdict, error)
}

// decideBackoff bounds the wait between two tries of a failed Decider call.
const (
	decideBackoffMin = 100 * time.Millisecond
	decideBackoffMax = 5 * time.Second
)

// decideBatch asks cfg.Decider for the pages of batch that need a decision (text, not
// rejected) and marks the duplicates, retrying with backoff until it answers or ctx ends
// (false: the stage is stopping and the batch stays queued).
func (s *Stage) decideBatch(ctx context.Context, batch []result) bool {
	var pages []DedupPage
	var idx []int
	for i := range batch {
		a := &batch[i].a
		if a.hasText && a.rec.Rejected == "" {
			pages = append(pages, DedupPage{Ref: recordKey(a.rec.URL, a.rec.FetchTime.UnixNano()), Hash: a.hashBytes, SimHash: a.simhash, Refetch: a.refetch})
			idx = append(idx, i)
		}
	}
	if len(pages) == 0 {
		return true
	}
	wait := decideBackoffMin
	for {
		vs, err := s.cfg.Decider.Decide(ctx, pages)
		if err == nil && len(vs) == len(pages) {
			for j, v := range vs {
				if v.Of != "" {
					rec := &batch[idx[j]].a.rec
					markDup(rec, v.Of, v.Kind, v.Distance, s.cfg.Filters.IncludeDuplicates)
				}
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.decideFails.Add(1)
		s.log.Warn("duplicate decision failed; the pages stay queued and are asked again", "pages", len(pages), "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, decideBackoffMax)
	}
}

// gather returns r and the results ready now, up to DecideBatch with a Decider (only r
// without): dropped results are let go (their jobs stay queued). closed reports that the
// results channel closed meanwhile.
func (s *Stage) gather(r result) (batch []result, closed bool) {
	batch = append(batch, r)
	for s.cfg.Decider != nil && len(batch) < s.cfg.DecideBatch {
		select {
		case r, ok := <-s.results:
			if !ok {
				return batch, true
			}
			if r.dropped {
				s.inflight.Add(-1)
				continue
			}
			batch = append(batch, r)
		default:
			return batch, false
		}
	}
	return batch, false
}
