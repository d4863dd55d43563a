package gossip

import (
	"bytes"
	"fmt"
)

// The keyring of an encrypted cluster (Config.Keys), changed while the node runs. Each
// call changes this node only; rotating the cluster's key is the same call on every
// member (the node layer distributes it), in three steps as with `consul keyring`:
// InstallKey(new) everywhere, UseKey(new) everywhere, RemoveKey(old) everywhere.

// Encrypted reports whether gossip runs with a keyring.
func (g *Gossip) Encrypted() bool { return g.keyring != nil }

// Keys returns the installed keys, the primary first (nil without a keyring).
func (g *Gossip) Keys() [][]byte {
	if g.keyring == nil {
		return nil
	}
	ks := g.keyring.GetKeys() // primary first
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = bytes.Clone(k)
	}
	return out
}

// InstallKey adds key to the keyring (received messages may use it); the primary key is
// unchanged. Installing an installed key does nothing.
func (g *Gossip) InstallKey(key []byte) error {
	if g.keyring == nil {
		return fmt.Errorf("%w: gossip runs without a cluster key", ErrKeyring)
	}
	if err := g.keyring.AddKey(bytes.Clone(key)); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyring, err)
	}
	return nil
}

// UseKey makes an installed key the primary (the one messages are sent with).
func (g *Gossip) UseKey(key []byte) error {
	if g.keyring == nil {
		return fmt.Errorf("%w: gossip runs without a cluster key", ErrKeyring)
	}
	if err := g.keyring.UseKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyring, err)
	}
	return nil
}

// RemoveKey removes a key that is not the primary. Removing a key not installed does
// nothing.
func (g *Gossip) RemoveKey(key []byte) error {
	if g.keyring == nil {
		return fmt.Errorf("%w: gossip runs without a cluster key", ErrKeyring)
	}
	if err := g.keyring.RemoveKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyring, err)
	}
	return nil
}
