package node

import (
	"testing"

	"go.uber.org/goleak"
)

// fasthttp's per-host connection cleaner sleeps out its idle timeout after the client is
// closed (it has no stop signal); it ends on its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"))
}
