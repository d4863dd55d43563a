package gossip

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/internal/clustertest"
)

func aliveNames(g *Gossip) []string {
	var out []string
	for _, m := range g.Alive() {
		out = append(out, m.Name)
	}
	return out
}

// TestKeyRequiredToJoin: with a cluster key, a process without it, or with another key,
// tries to join: it reaches no one and the members' list does not change.
func TestKeyRequiredToJoin(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	withKey := func(name string, k []byte) Config {
		c := testConfig(name)
		if k != nil {
			c.Keys = [][]byte{k}
		}
		c.JoinTimeout = 500 * time.Millisecond
		return c
	}
	a := startNode(t, withKey("a", key), false)
	b := startNode(t, withKey("b", key), false)
	if _, err := b.Join([]string{a.AdvertiseAddr()}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 5*time.Second, "a and b see each other", func() bool {
		return slices.Equal(aliveNames(a.Gossip), []string{"a", "b"}) && slices.Equal(aliveNames(b.Gossip), []string{"a", "b"})
	})

	for _, intruder := range []Config{withKey("nokey", nil), withKey("otherkey", bytes.Repeat([]byte{9}, 32))} {
		x := startNode(t, intruder, false)
		if n, err := x.Join([]string{a.AdvertiseAddr(), b.AdvertiseAddr()}); err == nil {
			t.Errorf("%s joined %d members", intruder.Name, n)
		}
		// Give the cluster time to hear of it, were it let in.
		time.Sleep(300 * time.Millisecond)
		for _, g := range []*node{a, b} {
			for _, m := range g.Members() { // any status: it was never even listed
				if m.Name == intruder.Name {
					t.Errorf("%s lists %s (%s) after it tried to join", g.cfg.Name, m.Name, m.Status)
				}
			}
		}
		clustertest.Eventually(t, 5*time.Second, "a and b still see each other", func() bool {
			return slices.Equal(aliveNames(a.Gossip), []string{"a", "b"}) && slices.Equal(aliveNames(b.Gossip), []string{"a", "b"})
		})
		if got := aliveNames(x.Gossip); !slices.Equal(got, []string{intruder.Name}) {
			t.Errorf("%s sees %v", intruder.Name, got)
		}
	}
}

// TestKeyRotation: install a new key everywhere, use it, remove the old one; the members
// stay together, and a node that has only the old key cannot join any more.
func TestKeyRotation(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 32)
	cfg := func(name string, keys ...[]byte) Config {
		c := testConfig(name)
		c.Keys = keys
		c.JoinTimeout = 500 * time.Millisecond
		return c
	}
	a := startNode(t, cfg("a", k1), false)
	b := startNode(t, cfg("b", k1), false)
	if _, err := b.Join([]string{a.AdvertiseAddr()}); err != nil {
		t.Fatal(err)
	}
	both := func() bool {
		return slices.Equal(aliveNames(a.Gossip), []string{"a", "b"}) && slices.Equal(aliveNames(b.Gossip), []string{"a", "b"})
	}
	clustertest.Eventually(t, 5*time.Second, "joined", both)
	if err := a.RemoveKey(k1); !errors.Is(err, ErrKeyring) {
		t.Fatalf("removing the primary: %v, want ErrKeyring", err)
	}
	for _, step := range []func(*Gossip) error{
		func(g *Gossip) error { return g.InstallKey(k2) },
		func(g *Gossip) error { return g.UseKey(k2) },
		func(g *Gossip) error { return g.RemoveKey(k1) },
	} {
		for _, g := range []*node{a, b} {
			if err := step(g.Gossip); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ks := a.Keys(); len(ks) != 1 || !bytes.Equal(ks[0], k2) {
		t.Fatalf("keys after rotation: %d", len(ks))
	}
	// Members keep talking: a metadata change still spreads.
	m := a.Local().Meta
	m.State = StateActive
	if err := a.SetMeta(m); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 5*time.Second, "update seen by b under the new key", func() bool {
		for _, x := range b.Alive() {
			if x.Name == "a" && x.Meta.State == StateActive {
				return true
			}
		}
		return false
	})
	old := startNode(t, cfg("old", k1), false)
	if _, err := old.Join([]string{a.AdvertiseAddr()}); err == nil {
		t.Error("a node with the removed key joined")
	}
	time.Sleep(200 * time.Millisecond)
	for _, m := range a.Members() {
		if m.Name == "old" {
			t.Errorf("a lists the old-key node (%s)", m.Status)
		}
	}
}

func TestBadKeyLength(t *testing.T) {
	c := testConfig("x")
	c.Keys = [][]byte{make([]byte, 10)}
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("10-byte key: %v", err)
	}
}
