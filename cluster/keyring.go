package cluster

// Rotating the cluster key while the cluster runs, as `consul keyring` does: the operator
// asks one node (crawlnode keyring, its API) to install a new key, make it the primary,
// or remove the old one; that node applies the step on every alive member by an
// authenticated internal call (POST /internal/v1/keyring over mutual TLS), each member
// applies it to its gossip keyring and saves DIR/keyring.json, so a member restarted
// after the rotation starts with the new keys. Every step is idempotent: on a partial
// failure the operator runs it again. A member down during a rotation keeps the old
// keys; if the old key was removed meanwhile it cannot rejoin until its keyring.json is
// given the new key (as with Consul).
//
// The key never travels in the clear: members accept the call only over mutual TLS from
// a verified member (or, in a cluster without TLS, from a loopback address), and the
// node's operator API takes keyring changes only from a loopback client.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/crawlnode/crawlnode/internal/clusterauth"
	"github.com/crawlnode/crawlnode/internal/httpjson"
)

// KeyringPath is the internal endpoint that applies a keyring step on one member.
const KeyringPath = "/internal/v1/keyring"

// Keyring operations.
const (
	KeyInstall = "install"
	KeyUse     = "use"
	KeyRemove  = "remove"
)

// ErrKeyring: a keyring step was refused or failed.
var ErrKeyring = errors.New("keyring")

// KeyringRequest is the body of a keyring step.
type KeyringRequest struct {
	Op  string `json:"op"`
	Key string `json:"key"` // base64
}

// KeyringMember is one member's keyring: the fingerprints (sha256, 8 bytes hex) of its
// keys, the primary first, or why it could not be read or changed.
type KeyringMember struct {
	Name  string   `json:"name"`
	Keys  []string `json:"keys,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Fingerprint is a key's short public name: the first 8 bytes of its SHA-256, in hex.
func Fingerprint(k []byte) string {
	s := sha256.Sum256(k)
	return hex.EncodeToString(s[:8])
}

// LocalKeyring returns this node's key fingerprints, the primary first.
func (c *Cluster) LocalKeyring() []string {
	var out []string
	for _, k := range c.gossip.Keys() {
		out = append(out, Fingerprint(k))
	}
	return out
}

// ApplyKeyring applies one step to this node's gossip keyring and saves it.
func (c *Cluster) ApplyKeyring(op string, key []byte) error {
	if c.gossip == nil || !c.gossip.Encrypted() {
		return fmt.Errorf("%w: this node runs without a cluster key", ErrKeyring)
	}
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	var err error
	switch op {
	case KeyInstall:
		err = c.gossip.InstallKey(key)
	case KeyUse:
		if !slices.ContainsFunc(c.gossip.Keys(), func(k []byte) bool { return bytes.Equal(k, key) }) {
			return fmt.Errorf("%w: key %s is not installed here; install it first", ErrKeyring, Fingerprint(key))
		}
		err = c.gossip.UseKey(key)
	case KeyRemove:
		err = c.gossip.RemoveKey(key)
	default:
		return fmt.Errorf("%w: unknown operation %q (install, use, remove)", ErrKeyring, op)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKeyring, err)
	}
	keys := c.gossip.Keys()
	if err := c.saveKeyring(keys); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyring, err)
	}
	// The internal calls' signing key follows the gossip keyring's primary, and every
	// key in it verifies (authKeys).
	if err := c.authKeys(keys); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyring, err)
	}
	c.log.Info("keyring changed", "op", op, "key", Fingerprint(key), "keys", len(c.gossip.Keys()))
	return nil
}

// keyringHandler serves KeyringPath: GET lists this node's fingerprints, POST applies a
// step. Only a verified member (mutual TLS) may change it, or in a cluster without TLS a
// loopback caller.
func (c *Cluster) keyringHandler(w http.ResponseWriter, r *http.Request) {
	if c.gossip == nil {
		httpjson.WriteError(w, http.StatusServiceUnavailable, "starting", "the node is still joining its cluster")
		return
	}
	if r.Method == http.MethodGet {
		httpjson.Write(w, http.StatusOK, KeyringMember{Name: c.self, Keys: c.LocalKeyring()})
		return
	}
	// The node serves this route behind clusterauth's Require, like every internal
	// route: the caller is an authenticated member (clusterauth.PeerFrom; with TLS, its
	// certificate's name). A key change travels only over mutual TLS, or over loopback.
	if _, ok := clusterauth.PeerFrom(r.Context()); !ok || !(c.cfg.TLS != nil || loopbackRemote(r)) {
		httpjson.WriteError(w, http.StatusForbidden, "keyring_refused", "keyring changes travel only over mutual TLS between members (or over loopback)")
		return
	}
	var req KeyringRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil {
		httpjson.WriteError(w, http.StatusBadRequest, "bad_body", "%v", err)
		return
	}
	key, err := ParseKey(req.Key)
	if err != nil {
		httpjson.WriteError(w, http.StatusBadRequest, "bad_key", "%v", err)
		return
	}
	if err := c.ApplyKeyring(req.Op, key); err != nil {
		httpjson.WriteError(w, http.StatusConflict, "keyring_failed", "%v", err)
		return
	}
	httpjson.Write(w, http.StatusOK, KeyringMember{Name: c.self, Keys: c.LocalKeyring()})
}

// loopbackRemote reports whether r came from a loopback address.
func loopbackRemote(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Keyring runs one step (op "" lists) on every alive member, this node first, and
// returns each member's keyring after it. err is non-nil when a member failed (the
// others keep the step; running it again is safe).
func (c *Cluster) Keyring(ctx context.Context, op string, key []byte) ([]KeyringMember, error) {
	if c.gossip == nil {
		return nil, fmt.Errorf("%w: the node is still joining its cluster", ErrKeyring)
	}
	if op != "" {
		if err := c.ApplyKeyring(op, key); err != nil {
			return []KeyringMember{{Name: c.self, Keys: c.LocalKeyring(), Error: err.Error()}}, err
		}
	}
	out := []KeyringMember{{Name: c.self, Keys: c.LocalKeyring()}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := 0
	for _, m := range c.gossip.Alive() {
		if m.Name == c.self || m.Meta.HTTPAddr == "" {
			continue
		}
		if op != "" && c.cfg.TLS == nil && !loopbackAddr(m.Meta.HTTPAddr) {
			mu.Lock()
			out = append(out, KeyringMember{Name: m.Name, Error: "not sent: the cluster runs without TLS and the member is not on loopback"})
			failed++
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func(name, addr string) {
			defer wg.Done()
			km, err := c.keyringCall(ctx, addr, op, key)
			km.Name = name
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				km.Error = err.Error()
				failed++
			}
			out = append(out, km)
		}(m.Name, m.Meta.HTTPAddr)
	}
	wg.Wait()
	slices.SortFunc(out[1:], func(a, b KeyringMember) int { return cmpString(a.Name, b.Name) })
	if failed > 0 {
		return out, fmt.Errorf("%w: %d member(s) failed; run the step again", ErrKeyring, failed)
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keyringCall asks the member at addr to apply a step (or, op "", to list its keys).
func (c *Cluster) keyringCall(ctx context.Context, addr, op string, key []byte) (KeyringMember, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	method, body := http.MethodGet, []byte(nil)
	if op != "" {
		method = http.MethodPost
		body, _ = json.Marshal(KeyringRequest{Op: op, Key: EncodeKey(key)})
	}
	req, err := http.NewRequestWithContext(ctx, method, c.PeerURL(addr)+KeyringPath, bytes.NewReader(body))
	if err != nil {
		return KeyringMember{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return KeyringMember{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var km KeyringMember
	if resp.StatusCode != http.StatusOK {
		var e httpjson.Error
		_ = json.Unmarshal(b, &e)
		return km, fmt.Errorf("HTTP %d: %s", resp.StatusCode, e.Error)
	}
	if err := json.Unmarshal(b, &km); err != nil {
		return km, err
	}
	return km, nil
}
