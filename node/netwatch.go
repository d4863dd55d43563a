package node

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// netWatch tells this node's own loss of the network apart from hosts that fail. A
// connect (or a DNS lookup) that fails with ENETUNREACH ("network is unreachable": this
// machine has no route to the address at all) is this machine's condition, not the
// host's; when it happens to a second host before any response arrived, the node's
// network is down (an interface gone, a container cut off its network) and failures until
// a response to a request sent since are not the hosts' doing: they cost a URL no
// attempt, count no robots.txt failure and park no host. Without this a node cut off for
// a few seconds turned every URL it tried into a dead letter and parked hosts whose
// robots.txt it could not reach, and after it came back those records were merged into
// the partitions' new owners, where a dead letter beats a queued URL: a chaos run lost
// 103 pages of one host that way.
//
// One host failing so (an IPv6-only host on a node without IPv6) while others answer is
// the host's trouble and is counted as before: every response clears the streak, and the
// first host of a streak is counted. Other signs of an outage (timeouts, refused
// connections, a router's EHOSTUNREACH) are not taken as the node's: on the internet a
// list of dead hosts fails just so, and waiting forever on them would not end a crawl.
type netWatch struct {
	log    *slog.Logger
	active atomic.Bool // a streak is open: responded has work to do
	mu     sync.Mutex
	first  string    // the streak's first host
	down   bool      // a second host failed so: the node's network is down
	since  time.Time // the streak's start
	local  int64     // failures not counted against their hosts in this streak
}

// offlineRetry is how long a host whose fetch failed because the node's network is down
// waits before it is tried again.
const offlineRetry = time.Second

// localNetErr reports whether err says this machine has no route to the address: a
// connect's ENETUNREACH, or a DNS lookup that failed so (Go's resolver keeps only the
// cause's text in a DNSError, net.newDNSError, hence the match on it).
func localNetErr(err error) bool {
	if errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var de *net.DNSError
	return errors.As(err, &de) && strings.Contains(de.Err, syscall.ENETUNREACH.Error())
}

// responded records that a response arrived to a request sent at sent: the network
// works, if the request was sent after the streak began. A request in flight when the
// network went away may still complete from what had arrived before (CI saw such
// responses clear the streak in the middle of TestNetworkDownIsNotTheHosts's outage, and
// the next host to fail used up its attempts); only a round trip begun after the first
// failure shows the network is back.
func (w *netWatch) responded(sent time.Time) {
	if !w.active.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.active.Load() || sent.Before(w.since) {
		return
	}
	if w.down {
		w.log.Warn("network reachable again: fetch failures count against hosts again",
			"down_for", time.Since(w.since).Round(time.Millisecond), "failures_not_counted", w.local)
	}
	w.first, w.down, w.local = "", false, 0
	w.active.Store(false)
}

// failed records a fetch of host that failed with err and reports whether the failure
// is the node's (its network is down), so that it must not count against the host.
func (w *netWatch) failed(host string, err error, now time.Time) bool {
	if !localNetErr(err) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.active.Load():
		w.first, w.since = host, now
		w.active.Store(true)
		return false
	case !w.down && host == w.first:
		return false
	case !w.down:
		w.down = true
		w.log.Warn("network unreachable from this node: fetch failures do not count against hosts until a response arrives",
			"first_host", w.first, "host", host, "err", err)
	}
	w.local++
	return true
}
