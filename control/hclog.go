package control

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogHCLog adapts a *slog.Logger to the hclog.Logger raft and raft-wal log through.
type slogHCLog struct {
	l    *slog.Logger
	name string
	args []interface{}
}

var _ hclog.Logger = (*slogHCLog)(nil)

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return &slogHCLog{l: l, name: name}
}

func toSlogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (h *slogHCLog) Log(level hclog.Level, msg string, args ...interface{}) {
	lv := toSlogLevel(level)
	ctx := context.Background()
	if !h.l.Enabled(ctx, lv) {
		return
	}
	all := make([]interface{}, 0, len(h.args)+len(args)+2)
	all = append(all, "raft_logger", h.name)
	all = append(all, h.args...)
	all = append(all, args...)
	h.l.Log(ctx, lv, msg, all...)
}

func (h *slogHCLog) Trace(msg string, args ...interface{}) { h.Log(hclog.Trace, msg, args...) }
func (h *slogHCLog) Debug(msg string, args ...interface{}) { h.Log(hclog.Debug, msg, args...) }
func (h *slogHCLog) Info(msg string, args ...interface{})  { h.Log(hclog.Info, msg, args...) }
func (h *slogHCLog) Warn(msg string, args ...interface{})  { h.Log(hclog.Warn, msg, args...) }
func (h *slogHCLog) Error(msg string, args ...interface{}) { h.Log(hclog.Error, msg, args...) }

func (h *slogHCLog) enabled(level hclog.Level) bool {
	return h.l.Enabled(context.Background(), toSlogLevel(level))
}
func (h *slogHCLog) IsTrace() bool              { return h.enabled(hclog.Trace) }
func (h *slogHCLog) IsDebug() bool              { return h.enabled(hclog.Debug) }
func (h *slogHCLog) IsInfo() bool               { return h.enabled(hclog.Info) }
func (h *slogHCLog) IsWarn() bool               { return h.enabled(hclog.Warn) }
func (h *slogHCLog) IsError() bool              { return h.enabled(hclog.Error) }
func (h *slogHCLog) ImpliedArgs() []interface{} { return h.args }

func (h *slogHCLog) With(args ...interface{}) hclog.Logger {
	c := *h
	c.args = append(append([]interface{}{}, h.args...), args...)
	return &c
}

func (h *slogHCLog) Name() string { return h.name }

func (h *slogHCLog) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *slogHCLog) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

// SetLevel is a no-op: the slog handler decides the level.
func (h *slogHCLog) SetLevel(hclog.Level) {}

func (h *slogHCLog) GetLevel() hclog.Level {
	switch {
	case h.IsTrace():
		return hclog.Trace
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (h *slogHCLog) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo)
}

func (h *slogHCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo).Writer()
}
