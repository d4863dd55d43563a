package fetch

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// DefaultUserAgent is sent when Config.UserAgent is empty. Its product token,
// "crawlnode", is the name robots.txt groups are matched against.
const DefaultUserAgent = "crawlnode/0.1 (+https://github.com/crawlnode/crawlnode)"

// Config configures a Client. Zero fields take the documented default
// (see DefaultConfig); Validate rejects values that cannot work.
type Config struct {
	// UserAgent is the User-Agent header sent with every request.
	// Default DefaultUserAgent.
	UserAgent string

	// ConnectTimeout bounds TCP connect (DNS lookup included). Default 10s.
	// TLS handshakes run lazily on the first write and fall under Timeout.
	ConnectTimeout time.Duration

	// Timeout bounds the whole request: waiting for a pooled connection,
	// connect, TLS, writing the request, the first byte, all headers and the
	// body. It is the defence against slowloris servers that trickle bytes.
	// Default 30s. A context deadline that comes earlier wins.
	Timeout time.Duration

	// FirstByteTimeout bounds the time from the request being written to the
	// first response byte. Enforced exactly: the connection's read deadline
	// is set to min(now+FirstByteTimeout, overall deadline) until one byte
	// arrives, then widened to the overall deadline. Default 15s.
	FirstByteTimeout time.Duration

	// MaxBodySize is the largest body kept, in bytes, both as received
	// (RawBody) and after content decoding (Body). Larger bodies are cut
	// there and Response.Truncated is set; the connection is then closed
	// rather than drained. Default 10 MiB.
	MaxBodySize int

	// MaxHeaderSize bounds status line plus headers, in bytes. A larger
	// header is an error of class "too_large_header". Default 64 KiB.
	MaxHeaderSize int

	// MaxConnsPerHost bounds open connections per scheme+host:port. A request
	// waits (within Timeout) for a free one. Default 4.
	MaxConnsPerHost int

	// MaxIdleConnDuration closes keep-alive connections idle that long.
	// Longer keeps connections warm for hosts with a crawl delay; shorter
	// holds fewer sockets. Default 30s.
	MaxIdleConnDuration time.Duration

	// Resolve overrides DNS for matching hosts (--resolve HOST=ADDR). Exact
	// patterns win over wildcards; among wildcards the longest suffix wins.
	Resolve []ResolveRule

	// AllowIPs are address ranges the fetcher may connect to although the address guard
	// refuses them (loopback, private, link-local, shared, reserved...: see ClassifyAddr),
	// e.g. an intranet to crawl (--allow-ips). The guard checks the address each connection
	// is dialed to, after DNS, so a name that resolves (or rebinds) to a refused address is
	// refused too. Hosts matched by a Resolve rule are always allowed: the operator named
	// them. Empty: only public addresses (safe by default); 0.0.0.0/0 and ::/0 allow all.
	AllowIPs []netip.Prefix

	// DNSCacheTTL caps how long a positive DNS answer is cached, and is the
	// TTL used when the Resolver reports none (the stdlib resolver never
	// does). Default 5m.
	DNSCacheTTL time.Duration
	// NegativeTTL is how long a failed lookup is cached (NXDOMAIN: at most
	// this, less when the zone's SOA says so). Default 30s.
	NegativeTTL time.Duration
	// TempFailTTL is how long a temporary failure (SERVFAIL, REFUSED, no
	// answer) is cached, at most NegativeTTL: short, because the next try may
	// succeed and every URL of the host waits on it, long enough that a host's
	// queued URLs do not each send a query. Default 5s.
	TempFailTTL time.Duration
	// DNSCacheSize bounds the number of cached names. Default 100000.
	DNSCacheSize int
	// Resolver answers DNS lookups. Default: a DNSClient asking DNSServers
	// when they are set (TTLs honoured), else the stdlib resolver (no TTLs).
	Resolver Resolver
	// DNSServers are the DNS servers ("ip" or "ip:port") asked directly,
	// bypassing the system resolver (--dns). Empty: the system resolver.
	DNSServers []string
	// DNSTimeout bounds one query to one DNS server; each name gets two
	// rounds over DNSServers. Default 2s. Only used with DNSServers.
	DNSTimeout time.Duration

	// TLSConfig is cloned for https connections (ServerName is set to the
	// URL's host for SNI and verification). Default: system roots.
	TLSConfig *tls.Config

	// Now is the clock, injectable for tests. Default time.Now.
	Now func() time.Time

	// DialFault, when set, is asked before each connect to addr ("host:port" of the
	// URL) and before each read and write on a connection to it; an error it returns
	// fails the connect as the system's would (wrapped in ErrConnect), or the read or
	// write (closing the connection). Fault injection for tests: a node cut off its
	// network, kept-alive connections included.
	DialFault func(addr string) error
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// FastTestConfig is the fast preset for tests: short timeouts, and a 50ms
// MaxIdleConnDuration so that fasthttp's per-host idle-connection cleaner
// goroutines (see FasthttpCleanerFunc) exit soon after Client.Close, within
// goleak's default retry window.
func FastTestConfig() Config {
	c := Config{
		ConnectTimeout:      time.Second,
		Timeout:             5 * time.Second,
		FirstByteTimeout:    3 * time.Second,
		MaxIdleConnDuration: 50 * time.Millisecond,
	}
	c.setDefaults()
	return c
}

// FasthttpCleanerFunc names the goroutine fasthttp runs per host with open
// connections. It sleeps up to MaxIdleConnDuration and exits after the
// host's last connection closes; with long idle durations a test can pass
// goleak.IgnoreAnyFunction(fetch.FasthttpCleanerFunc).
const FasthttpCleanerFunc = "github.com/valyala/fasthttp.(*HostClient).connsCleaner"

func (c *Config) setDefaults() {
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.FirstByteTimeout == 0 {
		c.FirstByteTimeout = 15 * time.Second
	}
	if c.MaxBodySize == 0 {
		c.MaxBodySize = 10 << 20
	}
	if c.MaxHeaderSize == 0 {
		c.MaxHeaderSize = 64 << 10
	}
	if c.MaxConnsPerHost == 0 {
		c.MaxConnsPerHost = 4
	}
	if c.MaxIdleConnDuration == 0 {
		c.MaxIdleConnDuration = 30 * time.Second
	}
	if c.DNSCacheTTL == 0 {
		c.DNSCacheTTL = 5 * time.Minute
	}
	if c.NegativeTTL == 0 {
		c.NegativeTTL = 30 * time.Second
	}
	if c.TempFailTTL == 0 {
		c.TempFailTTL = 5 * time.Second
	}
	if c.DNSCacheSize == 0 {
		c.DNSCacheSize = 100000
	}
	if c.DNSTimeout == 0 {
		c.DNSTimeout = 2 * time.Second
	}
	if c.Resolver == nil && len(c.DNSServers) == 0 {
		c.Resolver = StdResolver{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first unusable value. It expects defaults applied.
func (c *Config) Validate() error {
	switch {
	case strings.ContainsAny(c.UserAgent, "\r\n\x00"):
		return fmt.Errorf("%w: user agent contains control characters", ErrConfig)
	case c.ConnectTimeout < 0, c.Timeout < 0, c.FirstByteTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrConfig)
	case c.MaxBodySize < 0:
		return fmt.Errorf("%w: negative MaxBodySize", ErrConfig)
	case c.MaxHeaderSize < 256:
		return fmt.Errorf("%w: MaxHeaderSize %d < 256", ErrConfig, c.MaxHeaderSize)
	case c.MaxConnsPerHost < 0:
		return fmt.Errorf("%w: negative MaxConnsPerHost", ErrConfig)
	case c.DNSCacheTTL < 0, c.NegativeTTL < 0, c.TempFailTTL < 0, c.DNSCacheSize < 0, c.MaxIdleConnDuration < 0:
		return fmt.Errorf("%w: negative DNS cache or idle setting", ErrConfig)
	}
	for _, s := range c.DNSServers {
		if _, err := ParseDNSServer(s); err != nil {
			return err
		}
	}
	for _, p := range c.AllowIPs {
		if !p.IsValid() {
			return fmt.Errorf("%w: invalid AllowIPs prefix", ErrConfig)
		}
	}
	for _, r := range c.Resolve {
		if _, err := ParseResolve(r.Pattern + "=" + r.Addr); err != nil {
			return err
		}
	}
	return nil
}

// ParseAllowIP parses an --allow-ips value: a CIDR prefix ("10.0.0.0/8", "fd00::/8") or
// one address ("192.168.1.10", taken as /32 or /128). Host bits set are masked off.
func ParseAllowIP(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%w: %q: want CIDR (10.0.0.0/8) or IP address", ErrBadAllowIP, s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ResolveRule sends connections for matching hosts to Addr.
type ResolveRule struct {
	// Pattern is an exact host name ("a.sim.test") or "*.suffix", which
	// matches every name below suffix but not suffix itself. Lower case.
	Pattern string
	// Addr is "ip:port", or "ip" to keep the URL's port.
	Addr string
}

// ParseResolve parses a --resolve flag value "HOST=ADDR", e.g.
// "*.sim.test=127.0.0.1:8081" or "a.example=10.0.0.1".
func ParseResolve(spec string) (ResolveRule, error) {
	host, addr, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok {
		return ResolveRule{}, fmt.Errorf("%w: %q: want HOST=ADDR", ErrBadResolve, spec)
	}
	host = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
	addr = strings.TrimSpace(addr)
	name := strings.TrimPrefix(host, "*.")
	if name == "" || strings.ContainsAny(name, "*:/ ") {
		return ResolveRule{}, fmt.Errorf("%w: %q: bad host pattern %q (want name or *.suffix)", ErrBadResolve, spec, host)
	}
	if _, err := netip.ParseAddr(addr); err != nil {
		ip, port, err := net.SplitHostPort(addr)
		if err != nil {
			return ResolveRule{}, fmt.Errorf("%w: %q: address %q is neither ip nor ip:port", ErrBadResolve, spec, addr)
		}
		if _, err := netip.ParseAddr(ip); err != nil {
			return ResolveRule{}, fmt.Errorf("%w: %q: %q is not an IP address", ErrBadResolve, spec, ip)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return ResolveRule{}, fmt.Errorf("%w: %q: bad port %q", ErrBadResolve, spec, port)
		}
	}
	return ResolveRule{Pattern: host, Addr: addr}, nil
}

// resolveTable is the compiled form of the Resolve rules.
type resolveTable struct {
	exact    map[string]string
	suffixes []suffixRule // longest suffix first
}

type suffixRule struct {
	suffix string // ".sim.test"
	addr   string
}

func newResolveTable(rules []ResolveRule) *resolveTable {
	t := &resolveTable{exact: make(map[string]string)}
	for _, r := range rules {
		p := strings.ToLower(r.Pattern)
		if s, ok := strings.CutPrefix(p, "*"); ok {
			t.suffixes = append(t.suffixes, suffixRule{suffix: s, addr: r.Addr})
			continue
		}
		if _, dup := t.exact[p]; !dup {
			t.exact[p] = r.Addr
		}
	}
	// Longest suffix first; stable so that the first rule wins ties.
	for i := 1; i < len(t.suffixes); i++ {
		for j := i; j > 0 && len(t.suffixes[j].suffix) > len(t.suffixes[j-1].suffix); j-- {
			t.suffixes[j], t.suffixes[j-1] = t.suffixes[j-1], t.suffixes[j]
		}
	}
	return t
}

// lookup returns the dial address for host (lower case, no port) and port,
// and whether a rule matched.
func (t *resolveTable) lookup(host, port string) (string, bool) {
	addr, ok := t.exact[host]
	if !ok {
		for _, s := range t.suffixes {
			if len(host) > len(s.suffix) && strings.HasSuffix(host, s.suffix) {
				addr, ok = s.addr, true
				break
			}
		}
	}
	if !ok {
		return "", false
	}
	if ip, err := netip.ParseAddr(addr); err == nil {
		return net.JoinHostPort(ip.String(), port), true
	}
	return addr, true
}
