package frontier

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lockedBuf is a bytes.Buffer safe for a logger written from several goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// The frontier logs through Config.Logger with component=frontier: a drifted queue count,
// healed by a refill, is reported there and not on slog.Default().
func TestLoggerInjected(t *testing.T) {
	var buf lockedBuf
	cfg := noDelay(openDB(t, ""))
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	f := openF(t, cfg)
	mustAdd(t, f, urls("h.test", 2)...)
	f.mu.Lock()
	f.hosts["h.test"].queued += 3 // a drifted count: the next full refill corrects it
	f.queued += 3
	f.mu.Unlock()
	if got := drain(t, f); len(got) != 2 {
		t.Fatalf("drained %v", got)
	}
	out := buf.String()
	if !strings.Contains(out, "queue count corrected") || !strings.Contains(out, "component=frontier") ||
		!strings.Contains(out, "host=h.test") {
		t.Fatalf("log output %q", out)
	}
	if st := f.Stats(); st.Queued != 0 {
		t.Fatalf("queued %d after the correction", st.Queued)
	}
}
