package bgp

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// logger hands GoBGP's log lines to slog: session changes at Info, its
// chatter at Debug. A session's loss and return get lines of their own
// (sessionLog).
type logger struct {
	l        *slog.Logger
	level    gobgplog.LogLevel
	sessions sessionLog
}

func newLogger(l *slog.Logger) *logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	l = l.With("component", "bgp")
	return &logger{l: l, level: gobgplog.InfoLevel, sessions: sessionLog{l: l, since: map[string]time.Time{}}}
}

func (g *logger) log(level slog.Level, msg string, fields gobgplog.Fields) {
	if g.sessions.note(msg, fields) {
		return
	}
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

// sessionLog turns GoBGP's "Peer Up" and "Peer Down" (topic Peer, the
// neighbour's address as Key, the reason on a loss) into the lines an
// operator woken by a router's restart looks for: which peer, its state,
// why it went and how long it was up, then how long it was down. The
// loss is a warning: until the session is back that router has none of
// this node's routes. GoBGP logs these two from its FSM and nowhere
// else, and its watch API carries no reason; the bgp lab tests check the
// lines come out.
type sessionLog struct {
	l     *slog.Logger
	mu    sync.Mutex
	since map[string]time.Time // by peer: when its session last went up or down
}

// note logs msg if it is a session's change and reports whether it was.
func (s *sessionLog) note(msg string, fields gobgplog.Fields) bool {
	if fields["Topic"] != "Peer" || (msg != "Peer Up" && msg != "Peer Down") {
		return false
	}
	peer, _ := fields["Key"].(string)
	now := time.Now()
	s.mu.Lock()
	last, seen := s.since[peer]
	s.since[peer] = now
	s.mu.Unlock()
	if msg == "Peer Down" {
		reason, _ := fields["Reason"].(string)
		args := []any{"peer", peer, "state", "down", "reason", reason}
		if hint, ok := reasonHints[reason]; ok {
			args = append(args, "meaning", hint)
		}
		args = append(args, "retry_every", connectRetry.String())
		if seen {
			args = append(args, "up_for", now.Sub(last).Round(time.Millisecond).String())
		}
		s.l.Warn("bgp: session lost; that router has none of this node's routes until it is back", args...)
		return true
	}
	if !seen {
		s.l.Info("bgp: session established", "peer", peer, "state", "established")
		return true
	}
	s.l.Info("bgp: session established again; the routes are sent", "peer", peer, "state", "established",
		"down_for", now.Sub(last).Round(time.Millisecond).String())
	return true
}

// reasonHints say what GoBGP's reasons for a session's end mean here. With
// graceful restart (always on) GoBGP reports a connection that ended
// without a notification, or by the hold timer, as "graceful-restart".
var reasonHints = map[string]string{
	"graceful-restart":   "the connection ended without a notification, or no keepalive came within the hold time: the router restarting or unreachable; it may keep this node's routes for the restart time if it restarts gracefully",
	"read-failed":        "the connection ended without a notification: the router's BGP process gone, or a reset",
	"write-failed":       "the connection ended without a notification: the router's BGP process gone, or a reset",
	"hold-timer-expired": "no keepalive came within the hold time: the router or the path to it is down",
}
