package cluster

import (
	"context"
	"log/slog"
)

// quietLibs is a slog.Handler that keeps the Raft and memberlist libraries' own chatter
// (elections, pushes and pulls, new connections) out of the info level: their records
// below Warn pass only when the node logs at Debug. The node's own cluster events
// (leadership changed, partitions moved, members removed) are logged by control/ and node/
// and stay at info.
type quietLibs struct {
	h     slog.Handler
	quiet bool // this handler's records come from the Raft library
}

func newQuietLibs(h slog.Handler) slog.Handler { return &quietLibs{h: h} }

func (q *quietLibs) Enabled(ctx context.Context, l slog.Level) bool {
	if q.quiet && l < slog.LevelWarn && !q.h.Enabled(ctx, slog.LevelDebug) {
		return false
	}
	return q.h.Enabled(ctx, l)
}

func (q *quietLibs) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn && !q.h.Enabled(ctx, slog.LevelDebug) {
		lib := false
		r.Attrs(func(a slog.Attr) bool {
			lib = lib || (a.Key == "source" && a.Value.String() == "memberlist") || a.Key == "raft_logger"
			return !lib
		})
		if lib {
			return nil
		}
	}
	return q.h.Handle(ctx, r)
}

func (q *quietLibs) WithAttrs(as []slog.Attr) slog.Handler {
	quiet := q.quiet
	for _, a := range as {
		quiet = quiet || a.Key == "raft_logger"
	}
	return &quietLibs{h: q.h.WithAttrs(as), quiet: quiet}
}

func (q *quietLibs) WithGroup(name string) slog.Handler {
	return &quietLibs{h: q.h.WithGroup(name), quiet: q.quiet}
}
