package node

import "testing"

// TestNodeKeysStable: the node's keys come from its keyspace families and keep the bytes
// data directories written by older builds hold.
func TestNodeKeysStable(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{string(jobKey), "jops"},
		{string(scopeKey), "jscope"},
	} {
		if c.got != c.want {
			t.Errorf("key %q, want %q", c.got, c.want)
		}
	}
}
