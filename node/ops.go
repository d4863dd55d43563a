package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/net/idna"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/internal/keyspace"
)

// Operator controls that change what the node fetches: pause/resume and blocked domains.
// They are persisted in Badger under the node's 'j' family (job settings), so a restart
// keeps them. In a cluster these move into the Raft job configuration; the checks below
// stay where they are.

var jobKey = append([]byte{keyspace.NodeJob}, "ops"...)

type jobState struct {
	Paused  bool     `json:"paused"`
	Blocked []string `json:"blocked,omitempty"`
}

// ops is the node's operator state and its recent-error record.
type ops struct {
	stateMu sync.RWMutex // guards paused and blocked
	paused  bool
	blocked map[string]bool

	errMu     sync.Mutex
	recent    []api.RecentError // ring buffer, newest at recentPos-1
	recentPos int
	hostErrs  map[string]int64
}

const (
	recentErrors   = 200
	maxHostErrKeys = 100_000
)

func (n *Node) loadOps() error {
	n.ops.blocked = map[string]bool{}
	var st jobState
	err := n.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(jobKey)
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error { return json.Unmarshal(v, &st) })
	})
	if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("load job state: %w", err)
	}
	n.ops.paused = st.Paused
	for _, d := range st.Blocked {
		n.ops.blocked[d] = true
	}
	return nil
}

// saveOps persists the operator state; called with ops.stateMu held.
func (n *Node) saveOpsLocked() error {
	st := jobState{Paused: n.ops.paused}
	for d := range n.ops.blocked {
		st.Blocked = append(st.Blocked, d)
	}
	sort.Strings(st.Blocked)
	b, _ := json.Marshal(st)
	return n.db.Update(func(txn *badger.Txn) error { return txn.Set(jobKey, b) })
}

// SetPaused pauses or resumes fetching on every node of the cluster (through the Raft job
// configuration; this node applies it at once, the others within a second). Fetches in
// flight finish and are recorded.
func (n *Node) SetPaused(p bool) error {
	if n.cluster != nil && n.cluster.ControlReady() {
		var cmd control.Command = control.Resume{At: time.Now()}
		if p {
			cmd = control.Pause{At: time.Now()}
		}
		if err := n.cluster.ApplyJobCommand(cmd); err != nil {
			return err
		}
	}
	return n.setPausedLocal(p)
}

func (n *Node) setPausedLocal(p bool) error {
	n.ops.stateMu.Lock()
	defer n.ops.stateMu.Unlock()
	if n.ops.paused == p {
		return nil
	}
	n.ops.paused = p
	n.log.Info("fetching "+map[bool]string{true: "paused", false: "resumed"}[p], "by", "operator")
	return n.saveOpsLocked()
}

// Paused reports whether an operator paused fetching.
func (n *Node) Paused() bool {
	n.ops.stateMu.RLock()
	defer n.ops.stateMu.RUnlock()
	return n.ops.paused
}

// ErrBadDomain is returned for a domain that cannot be blocked.
var ErrBadDomain = errors.New("bad domain")

// NormalizeDomain lower-cases a domain, converts it to ASCII (punycode) and trims dots.
func NormalizeDomain(d string) (string, error) {
	d = strings.Trim(strings.ToLower(strings.TrimSpace(d)), ".")
	if d == "" || strings.ContainsAny(d, "/:@ ") {
		return "", fmt.Errorf("%w: %q", ErrBadDomain, d)
	}
	a, err := idna.Lookup.ToASCII(d)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadDomain, d, err)
	}
	return a, nil
}

// SetBlocked blocks or unblocks a domain and its subdomains. Queued URLs of blocked hosts
// stay queued (nothing is lost) and are fetched again once the domain is unblocked.
func (n *Node) SetBlocked(domain string, block bool) (string, error) {
	d, err := NormalizeDomain(domain)
	if err != nil {
		return "", err
	}
	if n.cluster != nil && n.cluster.ControlReady() {
		var cmd control.Command = control.UnblockDomain{Domain: d, At: time.Now()}
		if block {
			cmd = control.BlockDomain{Domain: d, At: time.Now()}
		}
		if err := n.cluster.ApplyJobCommand(cmd); err != nil {
			return "", err
		}
	}
	return d, n.setBlockedLocal(d, block)
}

func (n *Node) setBlockedLocal(d string, block bool) error {
	n.ops.stateMu.Lock()
	defer n.ops.stateMu.Unlock()
	if n.ops.blocked[d] == block {
		return nil
	}
	if block {
		n.ops.blocked[d] = true
	} else {
		delete(n.ops.blocked, d)
	}
	n.log.Info("domain "+map[bool]string{true: "blocked", false: "unblocked"}[block], "domain", d)
	return n.saveOpsLocked()
}

// applyJob makes the local operator state match the cluster's job configuration.
func (n *Node) applyJob(paused bool, blocked []string) {
	n.ops.stateMu.Lock()
	defer n.ops.stateMu.Unlock()
	same := n.ops.paused == paused && len(n.ops.blocked) == len(blocked)
	for _, d := range blocked {
		same = same && n.ops.blocked[d]
	}
	if same {
		return
	}
	if n.ops.paused != paused {
		n.log.Info("fetching "+map[bool]string{true: "paused", false: "resumed"}[paused], "by", "cluster")
	}
	n.ops.paused = paused
	n.ops.blocked = map[string]bool{}
	for _, d := range blocked {
		n.ops.blocked[d] = true
	}
	if err := n.saveOpsLocked(); err != nil {
		n.log.Error("save job state", "err", err)
	}
}

// Blocked lists the blocked domains.
func (n *Node) Blocked() []string {
	n.ops.stateMu.RLock()
	defer n.ops.stateMu.RUnlock()
	out := make([]string, 0, len(n.ops.blocked))
	for d := range n.ops.blocked {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// isBlocked reports whether hostKey (host[:port]) is a blocked domain or below one.
func (n *Node) isBlocked(hostKey string) bool {
	n.ops.stateMu.RLock()
	defer n.ops.stateMu.RUnlock()
	if len(n.ops.blocked) == 0 {
		return false
	}
	h := hostKey
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	for {
		if n.ops.blocked[h] {
			return true
		}
		i := strings.IndexByte(h, '.')
		if i < 0 {
			return false
		}
		h = h[i+1:]
	}
}

// noteError records a failed fetch for the recent-errors list and the host's error count.
func (n *Node) noteError(url, host, class, msg string) {
	o := &n.ops
	o.errMu.Lock()
	defer o.errMu.Unlock()
	e := api.RecentError{Time: n.cfg.Now().UTC(), URL: url, Host: host, Class: class, Message: msg}
	if len(o.recent) < recentErrors {
		o.recent = append(o.recent, e)
	} else {
		o.recent[o.recentPos] = e
	}
	o.recentPos = (o.recentPos + 1) % recentErrors
	if o.hostErrs == nil {
		o.hostErrs = map[string]int64{}
	}
	if _, ok := o.hostErrs[host]; !ok && len(o.hostErrs) >= maxHostErrKeys {
		for k := range o.hostErrs { // forget an arbitrary host: the counts are a guide
			delete(o.hostErrs, k)
			break
		}
	}
	o.hostErrs[host]++
}

// RecentErrors returns up to limit recent fetch errors, newest first; host filters.
func (n *Node) RecentErrors(limit int, host string) []api.RecentError {
	o := &n.ops
	o.errMu.Lock()
	defer o.errMu.Unlock()
	out := []api.RecentError{}
	for i := 0; i < len(o.recent) && len(out) < limit; i++ {
		j := (o.recentPos - 1 - i + 2*recentErrors) % recentErrors
		if j >= len(o.recent) {
			continue
		}
		if host == "" || o.recent[j].Host == host {
			out = append(out, o.recent[j])
		}
	}
	return out
}

// hostErrorCounts returns the n hosts with the most errors.
func (n *Node) topHostsByErrors(limit int) []struct {
	Host   string
	Errors int64
} {
	o := &n.ops
	o.errMu.Lock()
	type he = struct {
		Host   string
		Errors int64
	}
	all := make([]he, 0, len(o.hostErrs))
	for h, c := range o.hostErrs {
		all = append(all, he{h, c})
	}
	o.errMu.Unlock()
	sort.Slice(all, func(i, j int) bool {
		if all[i].Errors != all[j].Errors {
			return all[i].Errors > all[j].Errors
		}
		return all[i].Host < all[j].Host
	})
	if len(all) > limit {
		all = all[:limit]
	}
	return all
}

func (n *Node) hostErrors(host string) int64 {
	n.ops.errMu.Lock()
	defer n.ops.errMu.Unlock()
	return n.ops.hostErrs[host]
}
