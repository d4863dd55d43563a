package fetch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Resolver looks up the addresses of a host name. ttl is the answer's TTL,
// or 0 when unknown (the cache then uses Config.DNSCacheTTL). With an error,
// ttl may carry the negative-caching TTL of the answer (RFC 2308); the cache
// then keeps the failure that long, at most Config.NegativeTTL.
type Resolver interface {
	LookupHost(ctx context.Context, host string) (addrs []netip.Addr, ttl time.Duration, err error)
}

// StdResolver resolves through net.DefaultResolver; it reports no TTL.
type StdResolver struct{}

// LookupHost implements Resolver.
func (StdResolver) LookupHost(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	return addrs, 0, err
}

// dnsCache caches answers per name with a TTL, caches failures for a shorter
// negative TTL, bounds its size, and collapses concurrent lookups of one name
// into a single resolver call.
type dnsCache struct {
	res     Resolver
	ttl     time.Duration
	negTTL  time.Duration
	tempTTL time.Duration // for SERVFAIL and timeouts; 0: negTTL
	maxSize int
	now     func() time.Time

	mu       sync.Mutex
	entries  map[string]dnsEntry
	inflight map[string]*dnsCall

	lookups, hits, shared, queries, failures atomic.Int64
}

// DNSStats counts the DNS cache's work since the Client was built.
type DNSStats struct {
	// Lookups is the number of names asked of the cache (one per new
	// connection to a name without a --resolve rule or IP literal).
	Lookups int64
	// Hits were answered from the cache, positive or negative.
	Hits int64
	// Shared waited for a lookup of the same name already under way.
	Shared int64
	// Queries went to the Resolver (one per cache miss that led a lookup).
	Queries int64
	// Failures are Queries that ended in an error (NXDOMAIN, SERVFAIL, timeout).
	Failures int64
	// Size is the number of names cached now.
	Size int
}

// HitRate is the share of lookups that needed no query of their own.
func (s DNSStats) HitRate() float64 {
	if s.Lookups == 0 {
		return 0
	}
	return float64(s.Lookups-s.Queries) / float64(s.Lookups)
}

type dnsEntry struct {
	addrs   []netip.Addr
	err     error
	expires time.Time
}

type dnsCall struct {
	done    chan struct{}
	addrs   []netip.Addr
	err     error
	aborted bool // the leader's context ended the lookup
}

func newDNSCache(res Resolver, ttl, negTTL time.Duration, maxSize int, now func() time.Time) *dnsCache {
	return &dnsCache{
		res: res, ttl: ttl, negTTL: negTTL, maxSize: maxSize, now: now,
		entries:  make(map[string]dnsEntry),
		inflight: make(map[string]*dnsCall),
	}
}

// lookup returns the cached answer for host or asks the resolver, sharing
// one resolver call among concurrent callers. A waiter whose ctx ends stops
// waiting; the shared call itself runs under the first caller's ctx.
func (d *dnsCache) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return d.lookupCounted(ctx, host, true)
}

// dialLookup is lookup for the dialer, which runs right after the request's
// own lookup: it is not counted again in Lookups and Hits.
func (d *dnsCache) dialLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return d.lookupCounted(ctx, host, false)
}

func (d *dnsCache) lookupCounted(ctx context.Context, host string, count bool) ([]netip.Addr, error) {
	for {
		addrs, err, retry := d.lookupOnce(ctx, host, count)
		if !retry {
			return addrs, err
		}
	}
}

// lookupOnce does one round; retry is set when this caller waited on a
// shared lookup that was cut short by its leader's context while this
// caller's own context is still live.
func (d *dnsCache) lookupOnce(ctx context.Context, host string, count bool) (_ []netip.Addr, _ error, retry bool) {
	now := d.now()
	d.mu.Lock()
	if count {
		d.lookups.Add(1)
	}
	if e, ok := d.entries[host]; ok {
		if now.Before(e.expires) {
			d.mu.Unlock()
			if count {
				d.hits.Add(1)
			}
			return e.addrs, e.err, false
		}
		delete(d.entries, host)
	}
	if c, ok := d.inflight[host]; ok {
		d.mu.Unlock()
		if count {
			d.shared.Add(1)
		}
		select {
		case <-c.done:
			if c.aborted && ctx.Err() == nil {
				if count { // counted again in the next round
					d.lookups.Add(-1)
					d.shared.Add(-1)
				}
				return nil, nil, true
			}
			return c.addrs, c.err, false
		case <-ctx.Done():
			return nil, ctx.Err(), false
		}
	}
	c := &dnsCall{done: make(chan struct{})}
	d.inflight[host] = c
	d.mu.Unlock()

	d.queries.Add(1)
	addrs, ttl, err := d.res.LookupHost(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	c.addrs, c.err = addrs, err
	if err != nil {
		c.addrs = nil
		var de *net.DNSError
		if !errors.As(err, &de) {
			c.err = &net.DNSError{Err: err.Error(), Name: host, IsTemporary: true,
				IsTimeout: ctx.Err() != nil, UnwrapErr: err}
		}
	}

	d.mu.Lock()
	delete(d.inflight, host)
	// A lookup cut short by the caller's context says nothing about the name.
	c.aborted = ctx.Err() != nil
	if !c.aborted {
		exp := ttl
		if exp <= 0 || exp > d.ttl {
			exp = d.ttl
		}
		if c.err != nil {
			d.failures.Add(1)
			exp = d.negTTL
			var de *net.DNSError
			if d.tempTTL > 0 && d.tempTTL < exp && errors.As(c.err, &de) && !de.IsNotFound {
				exp = d.tempTTL
			}
			if ttl > 0 && ttl < exp {
				exp = ttl
			}
		}
		if exp > 0 && d.maxSize > 0 {
			if len(d.entries) >= d.maxSize {
				d.evictLocked(d.now())
			}
			d.entries[host] = dnsEntry{addrs: c.addrs, err: c.err, expires: d.now().Add(exp)}
		}
	}
	d.mu.Unlock()
	close(c.done)
	return c.addrs, c.err, false
}

// evictLocked drops expired entries, then, if still full, an arbitrary
// eighth of the cache (map order): cheaper than LRU bookkeeping on every hit,
// and a dropped name costs only one more lookup.
func (d *dnsCache) evictLocked(now time.Time) {
	for k, e := range d.entries {
		if !now.Before(e.expires) {
			delete(d.entries, k)
		}
	}
	drop := len(d.entries) - d.maxSize + 1
	if drop <= 0 {
		return
	}
	if m := d.maxSize / 8; drop < m {
		drop = m
	}
	for k := range d.entries {
		if drop <= 0 {
			break
		}
		delete(d.entries, k)
		drop--
	}
}

func (d *dnsCache) stats() DNSStats {
	return DNSStats{Lookups: d.lookups.Load(), Hits: d.hits.Load(), Shared: d.shared.Load(),
		Queries: d.queries.Load(), Failures: d.failures.Load(), Size: d.size()}
}

func (d *dnsCache) size() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}
