package node

import (
	"context"
	"sync"
)

// groupSync is a group commit over one fsync-like call: Wait returns once a call of fn
// that began after Wait was called has ended, so one fsync serves every caller that
// arrived while the previous one ran. At most one fn runs at a time; the goroutine that
// runs them lives only while there are callers.
type groupSync struct {
	fn func() error

	mu   sync.Mutex
	next *syncRound // the round callers join; it starts once the running one ends
	busy bool       // a goroutine is running rounds
	wg   sync.WaitGroup
}

type syncRound struct {
	done chan struct{}
	err  error
}

func newGroupSync(fn func() error) *groupSync { return &groupSync{fn: fn} }

// Wait blocks until a round of fn that began after the call has ended, and returns its
// error, or ctx's error if ctx ends first (the round still runs).
func (g *groupSync) Wait(ctx context.Context) error {
	g.mu.Lock()
	if g.next == nil {
		g.next = &syncRound{done: make(chan struct{})}
	}
	r := g.next
	if !g.busy {
		g.busy = true
		g.wg.Add(1)
		go g.run()
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *groupSync) run() {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		r := g.next
		if r == nil {
			g.busy = false
			g.mu.Unlock()
			return
		}
		g.next = nil
		g.mu.Unlock()
		r.err = g.fn()
		close(r.done)
	}
}

// drain waits for the running rounds to end (before what fn syncs is closed).
func (g *groupSync) drain() { g.wg.Wait() }
