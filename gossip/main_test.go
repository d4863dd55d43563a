package gossip

import (
	"testing"

	"go.uber.org/goleak"
)

// memberlist's goroutines (packet handler, stream listener, per-connection handlers,
// suspicion timers) end asynchronously after its Shutdown; goleak's default retries (up to
// about 2 s) wait for them. Nothing is ignored.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
