package bgp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// GoBGP's session changes come out as pier's own lines: the peer, its
// state, why it went, how long it was up and then down; its other lines
// pass as they are.
func TestSessionLog(t *testing.T) {
	var buf bytes.Buffer
	g := newLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	peer := func(msg string, extra ...string) {
		f := gobgplog.Fields{"Topic": "Peer", "Key": "10.0.0.1", "State": "BGP_FSM_OPENCONFIRM"}
		for i := 0; i+1 < len(extra); i += 2 {
			f[extra[i]] = extra[i+1]
		}
		g.Info(msg, f)
	}
	peer("Peer Up")
	time.Sleep(20 * time.Millisecond)
	peer("Peer Down", "Reason", "graceful-restart")
	time.Sleep(30 * time.Millisecond)
	peer("Peer Up")
	g.Info("Add a peer configuration", gobgplog.Fields{"Topic": "Peer", "Key": "10.0.0.2"})

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), buf.String())
	}
	want := [][]string{
		{"level=INFO", `msg="bgp: session established"`, "peer=10.0.0.1", "state=established"},
		{"level=WARN", "session lost", "peer=10.0.0.1", "state=down", "reason=graceful-restart", `meaning="the connection ended without a notification`, "retry_every=1s", "up_for="},
		{"level=INFO", "session established again", "peer=10.0.0.1", "state=established", "down_for="},
		{"level=INFO", `msg="Add a peer configuration"`, "Key=10.0.0.2"},
	}
	for i, w := range want {
		for _, s := range w {
			if !strings.Contains(lines[i], s) {
				t.Errorf("line %d %q: no %q", i, lines[i], s)
			}
		}
	}
	if strings.Contains(lines[0], "down_for") || strings.Contains(lines[0], "up_for") {
		t.Errorf("the first session's line says a duration: %s", lines[0])
	}
	// The durations are the real ones, not zero.
	for i, key := range map[int]string{1: "up_for=", 2: "down_for="} {
		v := lines[i][strings.Index(lines[i], key)+len(key):]
		if f := strings.Fields(v); len(f) > 0 {
			d, err := time.ParseDuration(f[0])
			if err != nil || d < 15*time.Millisecond || d > 5*time.Second {
				t.Errorf("line %d: %s%s, want the time between the lines", i, key, f[0])
			}
		}
	}
}
