package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/net/publicsuffix"

	"github.com/crawlnode/crawlnode/internal/keyspace"
)

// Scope says which discovered links a crawl follows. Seeds are always in scope.
type Scope string

const (
	// ScopeAll follows every http(s) link.
	ScopeAll Scope = "all"
	// ScopeSeedHosts follows links to the seeds' hosts only.
	ScopeSeedHosts Scope = "seed-hosts"
	// ScopeSeedDomains follows links within the seeds' registrable domains (example.co.uk
	// for www.example.co.uk, by the public suffix list), subdomains included.
	ScopeSeedDomains Scope = "seed-domains"
)

// ParseScope checks a scope name.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeAll, ScopeSeedHosts, ScopeSeedDomains:
		return sc, nil
	case "":
		return ScopeAll, nil
	}
	return "", fmt.Errorf("%w: scope %q: want all, seed-hosts or seed-domains", ErrBadConfig, s)
}

// scope is the node's scope filter. The seed hosts and domains are persisted (key "jscope"),
// so a resumed crawl keeps its scope without its seeds being given again.
type scope struct {
	rules    atomic.Pointer[scopeRules] // replaced whole when the job configuration changes
	mu       sync.RWMutex
	hosts    map[string]bool
	domains  map[string]bool
	loaded   bool
	needSave bool
}

// scopeRules are the link-following rules a running crawl may change.
type scopeRules struct {
	mode             Scope
	include, exclude []*regexp.Regexp
}

// filtering reports whether any rule can reject a link.
func (r *scopeRules) filtering() bool {
	return r.mode != ScopeAll || len(r.include)+len(r.exclude) > 0
}

var scopeKey = append([]byte{keyspace.NodeJob}, "scope"...)

// compilePatterns compiles include/exclude patterns (Go regexp syntax, matched anywhere in
// the canonical URL).
func compilePatterns(ps []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range ps {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: pattern %q: %v", ErrBadConfig, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// registrableDomain is eTLD+1 of a host key (port dropped); the host itself when it has no
// public suffix (an IP address, a single label).
func registrableDomain(hostKey string) string {
	h := hostKey
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil {
		return h
	}
	return d
}

func (n *Node) loadScope() error {
	s := &n.scope
	s.hosts, s.domains = map[string]bool{}, map[string]bool{}
	var saved struct{ Hosts, Domains []string }
	err := n.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(scopeKey)
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error { return json.Unmarshal(v, &saved) })
	})
	if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("load scope: %w", err)
	}
	for _, h := range saved.Hosts {
		s.hosts[h] = true
	}
	for _, d := range saved.Domains {
		s.domains[d] = true
	}
	return nil
}

// addSeedHosts widens the scope with the hosts of new seeds and persists it.
func (n *Node) addSeedHosts(hostKeys []string) error {
	s := &n.scope
	s.mu.Lock()
	changed := false
	for _, h := range hostKeys {
		if !s.hosts[h] {
			s.hosts[h], changed = true, true
		}
		if d := registrableDomain(h); !s.domains[d] {
			s.domains[d], changed = true, true
		}
	}
	if !changed {
		s.mu.Unlock()
		return nil
	}
	var saved struct{ Hosts, Domains []string }
	for h := range s.hosts {
		saved.Hosts = append(saved.Hosts, h)
	}
	for d := range s.domains {
		saved.Domains = append(saved.Domains, d)
	}
	s.mu.Unlock()
	b, _ := json.Marshal(saved)
	return n.db.Update(func(txn *badger.Txn) error { return txn.Set(scopeKey, b) })
}

// hasSeedHosts reports whether this node was ever given a seed (its scope is persisted).
func (n *Node) hasSeedHosts() bool {
	n.scope.mu.RLock()
	defer n.scope.mu.RUnlock()
	return len(n.scope.hosts) > 0
}

// inScope reports whether a discovered link (canonical URL and its host key) is followed.
func (n *Node) inScope(url, hostKey string) bool {
	s := &n.scope
	rules := s.rules.Load()
	switch rules.mode {
	case ScopeSeedHosts:
		s.mu.RLock()
		ok := s.hosts[hostKey]
		s.mu.RUnlock()
		if !ok {
			return false
		}
	case ScopeSeedDomains:
		s.mu.RLock()
		ok := s.domains[registrableDomain(hostKey)]
		s.mu.RUnlock()
		if !ok {
			return false
		}
	}
	for _, re := range rules.exclude {
		if re.MatchString(url) {
			return false
		}
	}
	if len(rules.include) == 0 {
		return true
	}
	for _, re := range rules.include {
		if re.MatchString(url) {
			return true
		}
	}
	return false
}
