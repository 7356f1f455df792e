package vrrp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"syscall"
	"time"
)

// The agent tells keepalived what to do through files (the config, the
// track files) and a signal, and sees the result on the interface (the
// addresses). Neither says what keepalived itself believes: a reload it
// did not take, or a track file change it missed, leaves an instance
// FAULT (or absent) while its gate is open, and the peer holds the
// addresses for good. keepalived logs every state it enters, so the
// supervisor follows its log and reloads it when an instance has
// disagreed with its gate for longer than stateGrace (Reconcile).
const (
	// stateGrace is how long an instance may disagree with its gate:
	// keepalived takes a track file change within milliseconds and a
	// reload within a few hundred.
	stateGrace = 2 * time.Second
	// nudgeEvery spaces the reloads of a keepalived that keeps
	// disagreeing (each one is logged).
	nudgeEvery = 5 * time.Second
	// nudgeLimit is how many reloads in a row are tried. A reload makes
	// keepalived read its config and track files again, but it does not
	// log the state of an instance that persists: a state lost from the
	// log stays unknown, and reloading forever would not help.
	nudgeLimit = 3
)

// stateLine matches keepalived 2.2's state lines:
//
//	(vr2) Entering BACKUP STATE
//	(vr2) Entering BACKUP STATE (init)
//	(vr1): entering FAULT state (tracked file track_vr1 has status -254)
var stateLine = regexp.MustCompile(`\(([A-Za-z0-9_.-]+)\):? [Ee]ntering ([A-Za-z]+) (?:STATE|state)`)

// linkLine matches keepalived's word on an interface's link: an
// instance on an interface that is down is FAULT whatever its gate says.
var linkLine = regexp.MustCompile(`Netlink reports (\S+) (down|up)`)

// startLine is the first line of each keepalived run in the log.
var startLine = []byte("Starting Keepalived")

// stateLog follows keepalived's log file from an offset and keeps the
// last state each instance entered.
type stateLog struct {
	path    string
	offset  int64
	partial []byte            // a line not yet ended
	states  map[string]string // instance → BACKUP, MASTER, FAULT, …
	down    map[string]bool   // interfaces keepalived last saw down
}

// reset follows path from offset with no state known.
func (s *stateLog) reset(path string, offset int64) {
	*s = stateLog{path: path, offset: offset, states: map[string]string{}, down: map[string]bool{}}
}

// read takes what keepalived wrote since the last read.
func (s *stateLog) read() error {
	if s.path == "" {
		return nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("keepalived log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("keepalived log: %w", err)
	}
	if st.Size() < s.offset { // truncated by hand: start over
		s.reset(s.path, 0)
	}
	if st.Size() == s.offset {
		return nil
	}
	buf := make([]byte, st.Size()-s.offset)
	n, err := f.ReadAt(buf, s.offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("keepalived log: %w", err)
	}
	s.offset += int64(n)
	s.take(buf[:n])
	return nil
}

// take parses complete lines; the rest waits for the next read.
func (s *stateLog) take(b []byte) {
	b = append(s.partial, b...)
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		s.partial = b
		return
	}
	for line := range bytes.SplitSeq(b[:end], []byte{'\n'}) {
		if bytes.Contains(line, startLine) {
			clear(s.states) // a new run starts with no instance
			clear(s.down)
			continue
		}
		if m := linkLine.FindSubmatch(line); m != nil {
			s.down[string(m[1])] = string(m[2]) == "down"
			continue
		}
		if m := stateLine.FindSubmatch(line); m != nil {
			s.states[string(m[1])] = string(bytes.ToUpper(m[2]))
		}
	}
	s.partial = append([]byte(nil), b[end+1:]...)
}

// agrees tells whether keepalived's state for an instance is the one its
// gate asks for: an open gate lets it be BACKUP or MASTER, a closed one
// puts it in FAULT.
func agrees(state string, open bool) bool {
	if open {
		return state == "BACKUP" || state == "MASTER"
	}
	return state == "FAULT"
}

// noteGate records the gate written for an instance. Called with k.mu held.
func (k *Keepalived) noteGate(instance string, open bool, now time.Time) {
	if k.gates == nil {
		k.gates = map[string]gate{}
	}
	if g, ok := k.gates[instance]; ok && g.open == open {
		return
	}
	k.gates[instance] = gate{open: open, at: now}
}

type gate struct {
	open bool
	at   time.Time
}

// Reconcile reads what keepalived logged since the last call and reloads
// it when an instance has disagreed with its gate for stateGrace. The
// agent calls it on its holder tick.
func (k *Keepalived) Reconcile(now time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pid == 0 || k.stopped {
		return nil
	}
	if err := k.log.read(); err != nil {
		return err
	}
	var off []string
	for _, in := range k.cfg.Instances {
		g, ok := k.gates[in.Name]
		if !ok {
			continue
		}
		state := k.log.states[in.Name]
		if agrees(state, g.open) || now.Sub(later(g.at, k.loadedAt)) < stateGrace {
			continue
		}
		if state == "FAULT" && k.log.down[in.Interface] {
			continue // its link is down: FAULT is right, a reload cannot help
		}
		if state == "" {
			state = "not running"
		}
		off = append(off, fmt.Sprintf("%s (gate %s, keepalived %s)", in.Name, openWord(g.open), state))
	}
	if len(off) == 0 {
		k.inRow = 0
		return nil
	}
	if now.Sub(k.nudgedAt) < nudgeEvery {
		return nil
	}
	sort.Strings(off)
	if k.inRow >= nudgeLimit {
		if k.inRow == nudgeLimit {
			k.logger.Error("keepalived still disagrees with its gates after reloads; see its log (a keepalived stopped with SIGTERM is started again by the agent, fresh)",
				"pid", k.pid, "reloads", nudgeLimit, "instances", off, "log", k.cfg.logPath())
			k.inRow++
		}
		return nil
	}
	k.nudgedAt, k.loadedAt = now, now
	k.nudges++
	k.inRow++
	k.logger.Warn("keepalived's instances disagree with their gates; reloading it", "pid", k.pid, "instances", off)
	if err := syscall.Kill(k.pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload keepalived: %w", err)
	}
	return nil
}

// Nudges counts the reloads Reconcile sent.
func (k *Keepalived) Nudges() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nudges
}

// State is the state keepalived last logged for an instance ("" if none
// since it started).
func (k *Keepalived) State(instance string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	_ = k.log.read()
	return k.log.states[instance]
}

func openWord(open bool) string {
	if open {
		return "open"
	}
	return "closed"
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
