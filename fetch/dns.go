package fetch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Resolver looks up the addresses of a host name. ttl is the answer's TTL,
// or 0 when unknown (the cache then uses Config.DNSCacheTTL).
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
	maxSize int
	now     func() time.Time

	mu       sync.Mutex
	entries  map[string]dnsEntry
	inflight map[string]*dnsCall
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
	for {
		addrs, err, retry := d.lookupOnce(ctx, host)
		if !retry {
			return addrs, err
		}
	}
}

// lookupOnce does one round; retry is set when this caller waited on a
// shared lookup that was cut short by its leader's context while this
// caller's own context is still live.
func (d *dnsCache) lookupOnce(ctx context.Context, host string) (_ []netip.Addr, _ error, retry bool) {
	now := d.now()
	d.mu.Lock()
	if e, ok := d.entries[host]; ok {
		if now.Before(e.expires) {
			d.mu.Unlock()
			return e.addrs, e.err, false
		}
		delete(d.entries, host)
	}
	if c, ok := d.inflight[host]; ok {
		d.mu.Unlock()
		select {
		case <-c.done:
			if c.aborted && ctx.Err() == nil {
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
			exp = d.negTTL
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

func (d *dnsCache) size() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}
