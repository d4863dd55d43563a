package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DNSClient is a Resolver that asks DNS servers directly (UDP, TCP when the
// answer is truncated) and reports each answer's TTL, so that the cache
// honours it. The stdlib resolver cannot: it hides TTLs.
//
// A name is asked for its A records first; only a NOERROR answer without any
// A record (NODATA) is followed by an AAAA query. That costs one query per
// name for the common dual-stack and IPv4-only hosts instead of two.
//
// Outcomes:
//   - NOERROR with addresses: the addresses, TTL = the smallest TTL among the
//     records used (CNAME chain included).
//   - NXDOMAIN, or NODATA for both types: *net.DNSError with IsNotFound; TTL
//     from the SOA in the authority section (RFC 2308: min of the SOA's TTL
//     and MINIMUM), else 0 (the cache then uses Config.NegativeTTL).
//   - SERVFAIL, REFUSED and other codes: *net.DNSError with IsTemporary.
//   - No answer within Timeout from any server after Attempts rounds:
//     *net.DNSError with IsTimeout and IsTemporary.
type DNSClient struct {
	servers  []string
	timeout  time.Duration
	attempts int
}

// DNSClientConfig configures NewDNSClient.
type DNSClientConfig struct {
	// Servers are "ip:port" (or "ip", port 53) of recursive resolvers or of an
	// authoritative test server. Asked in order; the next one on a timeout or a
	// SERVFAIL. Required.
	Servers []string
	// Timeout bounds one query to one server. Default 2s.
	Timeout time.Duration
	// Attempts is how many rounds over Servers are made before giving up on
	// timeouts. Default 2.
	Attempts int
}

// NewDNSClient builds a DNSClient. Server addresses must be IP literals.
func NewDNSClient(cfg DNSClientConfig) (*DNSClient, error) {
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%w: no DNS server", ErrConfig)
	}
	c := &DNSClient{timeout: cfg.Timeout, attempts: cfg.Attempts}
	if c.timeout <= 0 {
		c.timeout = 2 * time.Second
	}
	if c.attempts <= 0 {
		c.attempts = 2
	}
	for _, s := range cfg.Servers {
		addr, err := ParseDNSServer(s)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, addr)
	}
	return c, nil
}

// ParseDNSServer checks a --dns value ("ip", "ip:port", "[v6]:port") and
// returns it as "ip:port".
func ParseDNSServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if ip, err := netip.ParseAddr(s); err == nil {
		return net.JoinHostPort(ip.String(), "53"), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%w: DNS server %q: want ip or ip:port", ErrConfig, s)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("%w: DNS server %q: %q is not an IP address", ErrConfig, s, host)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return "", fmt.Errorf("%w: DNS server %q: bad port", ErrConfig, s)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// LookupHost implements Resolver.
func (c *DNSClient) LookupHost(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	addrs, ttl, err := c.query(ctx, host, dns.TypeA)
	var de *net.DNSError
	if err != nil && errors.As(err, &de) && de.IsNotFound && de.Err == errNoData {
		addrs, ttl, err = c.query(ctx, host, dns.TypeAAAA)
	}
	return addrs, ttl, err
}

var errNoData = "no such record"

// query asks the servers for one record type of host.
func (c *DNSClient) query(ctx context.Context, host string, qtype uint16) ([]netip.Addr, time.Duration, error) {
	fqdn := dns.Fqdn(host)
	m := new(dns.Msg)
	m.SetQuestion(fqdn, qtype)
	m.RecursionDesired = true
	m.SetEdns0(1232, false)
	var last error
	for round := 0; round < c.attempts; round++ {
		for _, srv := range c.servers {
			if err := ctx.Err(); err != nil {
				return nil, 0, &net.DNSError{Err: err.Error(), Name: host, Server: srv, IsTimeout: true, IsTemporary: true, UnwrapErr: err}
			}
			r, err := c.exchange(ctx, m, srv)
			if err != nil {
				last = &net.DNSError{Err: err.Error(), Name: host, Server: srv, IsTimeout: isTimeout(err), IsTemporary: true}
				continue
			}
			addrs, ttl, err := answer(r, host, srv, qtype)
			if err != nil {
				var de *net.DNSError
				if errors.As(err, &de) && !de.IsNotFound && len(c.servers) > 1 {
					last = err // SERVFAIL here: another server may know
					continue
				}
			}
			return addrs, ttl, err
		}
	}
	return nil, 0, last
}

func (c *DNSClient) exchange(ctx context.Context, m *dns.Msg, srv string) (*dns.Msg, error) {
	qctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cl := dns.Client{Net: "udp", Timeout: c.timeout, UDPSize: 1232}
	r, _, err := cl.ExchangeContext(qctx, m, srv)
	if err == nil && r.Truncated {
		cl.Net = "tcp"
		r, _, err = cl.ExchangeContext(qctx, m, srv)
	}
	if err == nil && r.Id != m.Id {
		err = errors.New("dns: id mismatch")
	}
	return r, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// answer turns a response into addresses and a TTL, or a *net.DNSError.
func answer(r *dns.Msg, host, srv string, qtype uint16) ([]netip.Addr, time.Duration, error) {
	switch r.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return nil, negTTL(r), &net.DNSError{Err: "no such host", Name: host, Server: srv, IsNotFound: true}
	default:
		return nil, 0, &net.DNSError{Err: "server answered " + dns.RcodeToString[r.Rcode], Name: host, Server: srv, IsTemporary: true}
	}
	var addrs []netip.Addr
	ttl := uint32(1<<32 - 1)
	for _, rr := range r.Answer {
		h := rr.Header()
		switch v := rr.(type) {
		case *dns.A:
			if qtype != dns.TypeA {
				continue
			}
			if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
				addrs = append(addrs, a)
			}
		case *dns.AAAA:
			if qtype != dns.TypeAAAA {
				continue
			}
			if a, ok := netip.AddrFromSlice(v.AAAA); ok {
				addrs = append(addrs, a)
			}
		case *dns.CNAME:
		default:
			continue
		}
		ttl = min(ttl, h.Ttl)
	}
	if len(addrs) == 0 {
		return nil, negTTL(r), &net.DNSError{Err: errNoData, Name: host, Server: srv, IsNotFound: true}
	}
	// A TTL of 0 means "do not cache"; the cache treats 0 as unknown, so
	// report the smallest positive duration instead.
	if ttl == 0 {
		return addrs, time.Nanosecond, nil
	}
	return addrs, time.Duration(ttl) * time.Second, nil
}

// negTTL is the negative-caching TTL of RFC 2308 section 5: the smaller of the
// SOA record's TTL and its MINIMUM field; 0 when there is no SOA.
func negTTL(r *dns.Msg) time.Duration {
	for _, rr := range r.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return time.Duration(min(soa.Hdr.Ttl, soa.Minttl)) * time.Second
		}
	}
	return 0
}
