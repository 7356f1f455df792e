package bgp

import (
	"context"
	"log/slog"
	"sort"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// logger hands GoBGP's log lines to slog: session changes at Info, its
// chatter at Debug.
type logger struct {
	l     *slog.Logger
	level gobgplog.LogLevel
}

func newLogger(l *slog.Logger) *logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &logger{l: l.With("component", "bgp"), level: gobgplog.InfoLevel}
}

func (g *logger) log(level slog.Level, msg string, fields gobgplog.Fields) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, fields[k])
	}
	g.l.Log(context.Background(), level, msg, args...) // GoBGP passes no context
}

func (g *logger) Panic(msg string, f gobgplog.Fields) { g.log(slog.LevelError, msg, f) }
func (g *logger) Fatal(msg string, f gobgplog.Fields) { g.log(slog.LevelError, msg, f) }
func (g *logger) Error(msg string, f gobgplog.Fields) { g.log(slog.LevelError, msg, f) }
func (g *logger) Warn(msg string, f gobgplog.Fields)  { g.log(slog.LevelWarn, msg, f) }
func (g *logger) Info(msg string, f gobgplog.Fields)  { g.log(slog.LevelInfo, msg, f) }
func (g *logger) Debug(msg string, f gobgplog.Fields) { g.log(slog.LevelDebug, msg, f) }

func (g *logger) SetLevel(level gobgplog.LogLevel) { g.level = level }
func (g *logger) GetLevel() gobgplog.LogLevel      { return g.level }
