package addrhold

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

func addrs(ss ...string) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, s := range ss {
		out[netip.MustParseAddr(s)] = true
	}
	return out
}

func dueAddrs(es []heldEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Address.String())
	}
	return out
}

// wantedBy takes every address of every load balancer placed here, as the
// active or the standby node, in an instance or alone; a shared address is
// owned by the lowest UUID; others' and loopback addresses are not wanted.
func TestWantedBy(t *testing.T) {
	lbs := []*model.LoadBalancer{
		placed("b", "n0", "n1", 7, "10.99.1.2", "10.99.2.9"),
		placed("a", "n1", "n0", 8, "10.99.1.1", "10.99.2.9"), // standby here, FIP shared with b
		placed("c", "n0", "", 0, "10.99.1.3", ""),            // lone
		placed("d", "n1", "n2", 9, "10.99.1.4", ""),          // not on n0
		placed("f", "n0", "n1", 7, "127.10.0.1", ""),
	}
	lbs[0].Name = "ns/b"
	_, view, lone, _ := Plan("n0", "eth0", lbs)
	got := map[string]string{}
	for a, e := range wantedBy(lbs, view, lone) {
		got[a.String()] = e.UUID
	}
	want := map[string]string{"10.99.1.1": "a", "10.99.1.2": "b", "10.99.2.9": "a", "10.99.1.3": "c"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wanted %v, want %v", got, want)
	}
	if e := wantedBy(lbs, view, lone)[netip.MustParseAddr("10.99.1.2")]; e.Name != "ns/b" {
		t.Errorf("owner %+v, want the load balancer's name", e)
	}
}

// The sweep's rules, step by step on one clock: a recorded address is due
// orphanGrace after it stopped being wanted, and only while on the
// interface; wanted again in between, it is not; an address on the
// interface before it was wanted and not on record is never due, until it
// is seen off the interface; one never recorded is never due.
func TestOrphanSweepRules(t *testing.T) {
	t0 := time.Unix(1000, 0)
	e := func(a, uuid string) heldEntry { return heldEntry{Address: netip.MustParseAddr(a), UUID: uuid} }
	want := func(es ...heldEntry) map[netip.Addr]heldEntry {
		out := map[netip.Addr]heldEntry{}
		for _, x := range es {
			out[x.Address] = x
		}
		return out
	}
	s := newOrphanSweep(map[netip.Addr]heldEntry{})
	// A (lb a), B (shared by b and c), F (already there: an operator's), all wanted.
	foreign := s.note(want(e("10.99.1.1", "a"), e("10.99.1.2", "b"), e("10.99.1.9", "f")), addrs("10.99.0.11", "10.99.1.9"), t0)
	if got := dueAddrs(foreign); !reflect.DeepEqual(got, []string{"10.99.1.9"}) {
		t.Fatalf("foreign %v, want the address already on the interface", got)
	}
	held := addrs("10.99.0.11", "10.99.1.1", "10.99.1.2", "10.99.1.9", "10.99.1.50") // .50: never wanted
	if d := s.due(held, t0.Add(time.Minute)); len(d) != 0 {
		t.Fatalf("due while wanted: %v", dueAddrs(d))
	}
	// a and b deleted, c keeps B; f deleted: F is not pier's.
	t1 := t0.Add(2 * time.Minute)
	s.note(want(e("10.99.1.2", "c")), held, t1)
	if d := s.due(held, t1.Add(orphanGrace-time.Millisecond)); len(d) != 0 {
		t.Fatalf("due within the grace: %v", dueAddrs(d))
	}
	d := s.due(held, t1.Add(orphanGrace))
	if got := dueAddrs(d); !reflect.DeepEqual(got, []string{"10.99.1.1"}) {
		t.Fatalf("due %v, want only the orphan 10.99.1.1", got)
	}
	if d[0].UUID != "a" {
		t.Errorf("orphan's owner %q, want a", d[0].UUID)
	}
	s.forget(d[0].Address) // removed
	if d := s.due(held, t1.Add(time.Hour)); len(d) != 0 {
		t.Fatalf("due after the removal: %v", dueAddrs(d))
	}
	if s.recorded[netip.MustParseAddr("10.99.1.2")].UUID != "c" {
		t.Errorf("the shared address's owner did not follow: %+v", s.recorded)
	}

	// Unwanted, then wanted again within the grace: never due.
	t2 := t1.Add(2 * time.Hour)
	s.note(want(), held, t2)
	s.note(want(e("10.99.1.2", "c")), held, t2.Add(time.Second))
	if d := s.due(held, t2.Add(time.Hour)); len(d) != 0 {
		t.Fatalf("due though wanted again: %v", dueAddrs(d))
	}

	// An unwanted address off the interface leaves the record and is not
	// swept if it comes back later (another holder's now).
	t3 := t2.Add(2 * time.Hour)
	s.note(want(), held, t3)
	s.due(addrs("10.99.0.11"), t3.Add(orphanGrace))
	if d := s.due(held, t3.Add(time.Hour)); len(d) != 0 || len(s.recorded) != 0 {
		t.Fatalf("after it left the interface: due %v, record %v", dueAddrs(d), s.recorded)
	}

	// A foreign address seen off the interface is pier's from then on.
	s.note(want(e("10.99.1.9", "g")), held, t3)
	s.due(addrs("10.99.0.11"), t3.Add(time.Second))
	if _, ok := s.recorded[netip.MustParseAddr("10.99.1.9")]; !ok {
		t.Fatalf("foreign address off the interface not recorded: %v", s.recorded)
	}
	// The interface unreadable at a Sync: nothing new is recorded.
	s.note(want(e("10.99.1.9", "g"), e("10.99.1.7", "h")), nil, t3)
	if _, ok := s.recorded[netip.MustParseAddr("10.99.1.7")]; ok {
		t.Fatalf("recorded an address without knowing whether it was on the interface")
	}
}

func testHolder(t *testing.T, dir string) (*Holder, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	h := &Holder{cfg: Config{Dir: dir, Interface: "eth0", Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	h.orphans = newOrphanSweep(h.readRecord())
	return h, &logs
}

// The record survives a restart: written atomically (no temporary file
// left, mode 0600, sorted), read back by the next holder, and rewritten
// only when it changes.
func TestRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h, logs := testHolder(t, dir)
	if len(h.orphans.recorded) != 0 || logs.Len() != 0 {
		t.Fatalf("a missing record: %v, logs %q", h.orphans.recorded, logs)
	}
	want := map[netip.Addr]heldEntry{}
	for _, x := range []heldEntry{{netip.MustParseAddr("10.99.1.2"), "u2", "ns/two"}, {netip.MustParseAddr("10.99.1.10"), "u1", "ns/one"}, {netip.MustParseAddr("fd00::1"), "u3", "group:g"}} {
		want[x.Address] = x
	}
	h.recordHeld(want, map[netip.Addr]bool{}, time.Now())
	path := filepath.Join(dir, heldFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if i, j := strings.Index(string(b), "10.99.1.2"), strings.Index(string(b), "10.99.1.10"); i < 0 || j < i {
		t.Errorf("record not sorted by address:\n%s", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files %v, want the record alone (no temporary file)", entries)
	}
	// Unchanged: not rewritten.
	old := st.ModTime()
	time.Sleep(10 * time.Millisecond)
	h.recordHeld(want, map[netip.Addr]bool{}, time.Now())
	if st, _ := os.Stat(path); !st.ModTime().Equal(old) {
		t.Errorf("unchanged record rewritten")
	}
	next, logs := testHolder(t, dir)
	if !reflect.DeepEqual(next.orphans.recorded, want) || logs.Len() != 0 {
		t.Fatalf("read back %v (logs %q), want %v", next.orphans.recorded, logs, want)
	}
}

// A corrupt or unreadable record is set aside with a warning that says
// what it costs; the holder starts with an empty record (it removes
// nothing) and writes a good one at the next change.
func TestRecordCorrupt(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":     `{"addresses":[{"address":"10.99.1.1","uu`,
		"not json":      "10.99.1.1\n10.99.1.2\n",
		"bad address":   `{"addresses":[{"address":"10.99.1.300","uuid":"a"}]}`,
		"no address":    `{"addresses":[{"uuid":"a"}]}`,
		"unknown field": `{"addresses":[],"extra":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, heldFile)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			h, logs := testHolder(t, dir)
			if len(h.orphans.recorded) != 0 {
				t.Fatalf("record from corrupt file: %v", h.orphans.recorded)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "unreadable") || !strings.Contains(logs.String(), path) {
				t.Errorf("log %q: want a warning naming the file", logs)
			}
			if b, err := os.ReadFile(path + ".corrupt"); err != nil || string(b) != content {
				t.Errorf("not set aside: %q, %v", b, err)
			}
			h.recordHeld(map[netip.Addr]heldEntry{netip.MustParseAddr("10.99.1.1"): {Address: netip.MustParseAddr("10.99.1.1"), UUID: "a"}}, map[netip.Addr]bool{}, time.Now())
			if next, _ := testHolder(t, dir); len(next.orphans.recorded) != 1 {
				t.Errorf("record after a corrupt one: %v", next.orphans.recorded)
			}
		})
	}
	// A record that cannot be read (a folder in its place) is the same.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, heldFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if h, logs := testHolder(t, dir); len(h.orphans.recorded) != 0 || !strings.Contains(logs.String(), "unreadable") {
		t.Errorf("unreadable record: %v, logs %q", h.orphans.recorded, logs)
	}
}
