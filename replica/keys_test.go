package replica

import (
	"testing"

	"github.com/crawlnode/crawlnode/internal/keyspace"
)

// TestReplicaKeysStable: the copies' keys are in the family the keyspace registry gives
// package replica, and keep the bytes data directories written by older builds hold.
func TestReplicaKeysStable(t *testing.T) {
	owned := false
	for _, f := range keyspace.Families {
		if f.Byte == keyspace.Replica {
			owned = f.Owner == "replica"
		}
	}
	if !owned {
		t.Errorf("family %q is not registered to package replica", keyspace.Replica)
	}
	for _, c := range []struct{ got, want string }{
		{string(replicaPrefix(7)), "R\x00\x07"},
		{string(replicaMetaKey(0x0102)), "R\x01\x02\x00"},
		{string(replicaKey(7, []byte("q\x00\x07k"))), "R\x00\x07q\x00\x07k"},
		{string(replicaPrefix(outboxSlot)), "R\x01\x0f"}, // the first outbox slot: ring.PartitionCount (271)
		{string(changeMarkKey), "R\xff\xffcut"},
	} {
		if c.got != c.want {
			t.Errorf("key %q, want %q", c.got, c.want)
		}
	}
}
