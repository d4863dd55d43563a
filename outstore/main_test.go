package outstore

import (
	"testing"

	"go.uber.org/goleak"
)

// net/http keeps idle keep-alive connections to the store open after a test; they close
// on their own (IdleConnTimeout).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}
