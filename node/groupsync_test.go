package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroupSyncCoversCallers: every Wait returns only after a round that began after it,
// and concurrent callers share rounds.
func TestGroupSyncCoversCallers(t *testing.T) {
	var written, synced atomic.Int64 // a "file": writes, and the write count the last sync covered
	var rounds atomic.Int64
	g := newGroupSync(func() error {
		rounds.Add(1)
		w := written.Load()
		time.Sleep(2 * time.Millisecond)
		synced.Store(w)
		return nil
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				mine := written.Add(1)
				if err := g.Wait(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if s := synced.Load(); s < mine {
					t.Errorf("write %d acknowledged with only %d synced", mine, s)
					return
				}
			}
		}()
	}
	wg.Wait()
	g.drain()
	if r := rounds.Load(); r >= 1000 {
		t.Errorf("%d rounds for 1000 waits: no grouping", r)
	} else {
		t.Logf("1000 waits served by %d rounds", r)
	}
}

// TestGroupSyncContext: a caller whose context ends gets its error; the round goes on.
func TestGroupSyncContext(t *testing.T) {
	release := make(chan struct{})
	g := newGroupSync(func() error { <-release; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx); err == nil {
		t.Fatal("Wait with a cancelled context returned nil")
	}
	close(release)
	g.drain()
}
