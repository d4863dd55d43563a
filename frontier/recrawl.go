package frontier

import (
	"math"
	"time"
)

// Recrawl configures continuous crawling: every fetched URL is scheduled for another
// visit, at an interval estimated from how often it was seen to change. The zero value
// is off (a batch crawl: each URL fetched once).
type Recrawl struct {
	// Enabled turns revisits on. A URL fetched while it is off is not scheduled.
	Enabled bool
	// Min and Max bound the interval between two visits of a URL. Defaults 1h and 30 days
	// (when Enabled). Min == Max is a fixed interval.
	Min, Max time.Duration
	// Share is the part of each host's leases that goes to revisits while the host also
	// has new URLs waiting (a deficit counter; with only one kind waiting, that kind gets
	// every slot). Default 0.5; in (0,1].
	Share float64
}

func (r Recrawl) withDefaults() Recrawl {
	if r.Min <= 0 {
		r.Min = time.Hour
	}
	if r.Max <= 0 {
		r.Max = 30 * 24 * time.Hour
	}
	if r.Max < r.Min {
		r.Max = r.Min
	}
	if !(r.Share > 0) || r.Share > 1 {
		r.Share = 0.5
	}
	return r
}

// Validators is what the frontier keeps about a URL's last fetch, for conditional
// requests and for the change-rate estimate. It travels in the URL's queue record.
type Validators struct {
	ETag, LastModified string // as the server sent them ("" if not)
	Hash               uint64 // caller's hash of the last body (0: none)
	Fetched            int64  // unix ns of the last fetch (0: never)
	// Visits counts the fetches after the first, Changes those that saw a new version;
	// Observed is the sum of the intervals those visits covered (ns). The three are halved
	// together past maxVisits, so the estimate follows a page whose habits change.
	Visits, Changes uint32
	Observed        int64
	Interval        int64 // ns: the interval chosen after the last fetch
	Hint            int64 // ns: a change interval announced by a sitemap (0: none)
}

func (v *Validators) encode(e *enc) {
	e.s(v.ETag)
	e.s(v.LastModified)
	e.u(v.Hash)
	e.i(v.Fetched)
	e.u(uint64(v.Visits))
	e.u(uint64(v.Changes))
	e.i(v.Observed)
	e.i(v.Interval)
	e.i(v.Hint)
}

func (v *Validators) decode(d *dec) {
	v.ETag = d.s()
	v.LastModified = d.s()
	v.Hash = d.u()
	v.Fetched = d.i()
	v.Visits = uint32(d.u())
	v.Changes = uint32(d.u())
	v.Observed = d.i()
	v.Interval = d.i()
	v.Hint = d.i()
}

// Version is what one fetch saw of a page (Outcome.Version).
type Version struct {
	ETag, LastModified string
	Hash               uint64 // hash of the body (0 with NotModified, or when there is none)
	NotModified        bool   // the server answered 304 to the conditional request
}

// backoff multiplies the interval of a page that has not been seen to change yet.
const backoff = 1.5

// visitsPerChange is how many visits per expected change NextInterval aims at.
const visitsPerChange = 4

// maxVisits is where the change counts are halved.
const maxVisits = 16

// Observe folds one fetch at now into the validators: a revisit counts one interval,
// and a change when the body's hash differs from the last one (a 304, or an equal hash,
// is no change). It is pure.
func Observe(prev Validators, v *Version, now time.Time) Validators {
	nv := prev
	changed := false
	if v != nil {
		if !v.NotModified {
			changed = prev.Hash != 0 && v.Hash != 0 && v.Hash != prev.Hash
			if v.Hash != 0 {
				nv.Hash = v.Hash
			}
			nv.ETag, nv.LastModified = v.ETag, v.LastModified
		} else {
			if v.ETag != "" {
				nv.ETag = v.ETag
			}
			if v.LastModified != "" {
				nv.LastModified = v.LastModified
			}
		}
	}
	t := now.UnixNano()
	if prev.Fetched != 0 && t > prev.Fetched {
		nv.Visits++
		nv.Observed += t - prev.Fetched
		if changed {
			nv.Changes++
		}
		if nv.Visits > maxVisits {
			nv.Visits /= 2
			nv.Changes /= 2
			nv.Observed /= 2
		}
	}
	nv.Fetched = t
	return nv
}

// ChangeRate is the Cho and Garcia-Molina estimate of a page's Poisson change rate (per
// second) from n regular visits of which x saw a change, over mean interval I:
// r = -ln((n - x + 0.5) / (n + 0.5)) / I. It is less biased than x/(nI), which can never
// exceed 1/I. ok is false before the first revisit.
func ChangeRate(v Validators) (perSecond float64, ok bool) {
	if v.Visits == 0 || v.Observed <= 0 {
		return 0, false
	}
	n, x := float64(v.Visits), float64(min(v.Changes, v.Visits))
	mean := float64(v.Observed) / n / float64(time.Second)
	return -math.Log((n-x+0.5)/(n+0.5)) / mean, true
}

// NextInterval is the time until a URL's next visit (pure):
//
//   - first fetch: the sitemap's hint if any, else the geometric mean of Min and Max;
//   - no change seen yet: 1.5 times the last interval (unchanged pages back off);
//   - else a quarter of the mean time between changes, 1/(4r), so a page is visited about
//     four times per change it makes (a copy is then stale for an eighth of the time on
//     average); while every visit saw a change, at most half the last
//     interval (the estimate is blind to changes hidden inside one interval);
//
// then divided by the importance factor (relative importance, 1 = an average page, to the
// power 1/4, within 0.5..2: pages with more importance come sooner; 0 = unknown, no
// factor), and held within [Min, Max].
func NextInterval(c Recrawl, v Validators, importance float64) time.Duration {
	c = c.withDefaults()
	var d float64
	if rate, ok := ChangeRate(v); !ok {
		if v.Hint > 0 {
			d = float64(v.Hint)
		} else {
			d = math.Sqrt(float64(c.Min) * float64(c.Max))
		}
	} else if v.Changes == 0 {
		d = backoff * float64(max(v.Interval, int64(c.Min)))
	} else {
		d = 1 / (visitsPerChange * rate) * float64(time.Second)
		if v.Changes >= v.Visits && v.Interval > 0 {
			// Every visit saw a change: the estimate cannot tell how many changes each
			// interval hid, so halve the interval at least until a visit finds the page
			// as it was.
			d = min(d, float64(v.Interval)/2)
		}
	}
	if importance > 0 {
		d /= min(2, max(0.5, math.Pow(importance, 0.25)))
	}
	d = min(max(d, float64(c.Min)), float64(c.Max))
	return time.Duration(d)
}

// relativeImportance is a URL's OPIC history over the moving average of the histories of
// the URLs fetched so far (1 = an average page; 0 when there is no cash, e.g.
// breadth-first order), for NextInterval.
func (f *Frontier) relativeImportance(history float64) float64 {
	if !(history > 0) {
		return 0
	}
	f.historyMu.Lock()
	defer f.historyMu.Unlock()
	if f.historyAvg == 0 {
		f.historyAvg = history
	} else {
		f.historyAvg += (history - f.historyAvg) / 256
	}
	return history / f.historyAvg
}

// revisitSlots is how many revisits of one host may wait in its queue at once; the
// others stay scheduled (r keys) and are pushed back a little, so the host's buffer
// always has room for new URLs and the revisit share can be honoured.
func (f *Frontier) revisitSlots() int { return max(1, f.cfg.Prefetch/2) }

// pickLocked chooses which buffered URL of h a lease takes: revisits (band 0, at the
// front) get Recrawl.Share of the host's leases through a deficit counter while new URLs
// wait too; otherwise the first URL.
func (f *Frontier) pickLocked(h *host) int {
	if h.revisits == 0 || len(h.prefetch) == 0 {
		return 0
	}
	share := f.recrawl.Load().Share
	h.revisitCredit = min(h.revisitCredit+share, 1+share)
	ri, di := -1, -1
	for i, it := range h.prefetch {
		if prioOfKey(it.key) == bandRevisit {
			if ri < 0 {
				ri = i
			}
		} else if di < 0 {
			di = i
		}
		if ri >= 0 && di >= 0 {
			break
		}
	}
	switch {
	case ri < 0:
		return di
	case di < 0:
		h.revisitCredit = max(0, h.revisitCredit-1)
		return ri
	case h.revisitCredit >= 1:
		h.revisitCredit--
		return ri
	}
	return di
}

// SetRecrawl replaces the recrawl settings (the job configuration); defaults fill the
// zero fields. URLs already scheduled keep their time; the next fetch uses the new bounds.
func (f *Frontier) SetRecrawl(r Recrawl) {
	if r.Enabled {
		r = r.withDefaults()
	}
	f.recrawl.Store(&r)
}

// RecrawlSettings returns the recrawl settings in effect.
func (f *Frontier) RecrawlSettings() Recrawl { return *f.recrawl.Load() }
