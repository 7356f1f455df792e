package faults

import (
	"path/filepath"
	"testing"
	"time"

	"pier.dev/pier/internal/store/bolt"
)

// TestPierKilledAfterMemberChange: SIGKILL of pier run at once after an
// endpoint change served, three times. The store writes a change of
// members alone behind (bolt.Store.PutMembers), so the state file may
// still hold the old member when pier dies: the test puts the old member
// back in the file before each restart, the state such a crash leaves.
// The next pier reads the EndpointSlices again before any agent runs, so
// the new member keeps serving and the restarted pier stores it; the old
// member, stopped once replaced, gets no request (it would fail or be
// retried, late), and no request fails.
func TestPierKilledAfterMemberChange(t *testing.T) {
	e := newEnv(t)
	backends := startEchos(t, "members", 4)
	write(t, e.manifests, "members-svc.yaml", backendYAML("members", pods(backends[:1])))
	write(t, e.manifests, "members.yaml", simple("members", "", "members.example", "members").yaml())
	p := e.start(nil)
	lb := lbNamed(t, p, ns+"/members")
	tg := target{name: "members", addr: lb.VIP, port: p.HTTPPort, host: "members.example", path: "/"}

	l := startLoad(tg)
	old := backends[0]
	for round, b := range backends[1:] {
		e.awaitRuntimeUpdate("members-svc.yaml", backendYAML("members", pods([]*echoBackend{b})))
		// The old member goes away: a request HAProxy sent it would fail.
		old.stop()
		p.Kill()
		if seen, _ := podsSeen(tg, 2, 300*time.Millisecond); len(seen) != 1 || seen[b.name] == 0 {
			t.Fatalf("round %d, pier killed: answered by %v, want %s alone", round, seen, b.name)
		}
		// The state file may hold the new member when pier dies, or the
		// old one if the change was still pending. The test makes it the
		// old one, the worst case, after logging which it was.
		st, err := bolt.Open(filepath.Join(e.state, "pier.db"))
		if err != nil {
			t.Fatal(err)
		}
		held, err := st.Get(t.Context(), lb.UUID)
		if err != nil || len(held.Pools[0].Members) != 1 {
			t.Fatalf("round %d: the state file holds %+v, %v", round, held, err)
		}
		t.Logf("round %d: at the kill the state file held the member at port %d (new: %d)", round, held.Pools[0].Members[0].Port, b.port)
		held.Pools[0].Members[0].Port = old.port
		if err := st.PutSpec(t.Context(), held); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		p = e.start(p)
		lbNamed(t, p, ns+"/members")
		stored, err := getLB(p, lb.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if m := stored.Pools[0].Members; len(m) != 1 || m[0].Port != b.port {
			t.Fatalf("round %d: the restarted pier stores members %+v, want port %d (%s)", round, m, b.port, b.name)
		}
		if seen, _ := podsSeen(tg, 2, 300*time.Millisecond); len(seen) != 1 || seen[b.name] == 0 {
			t.Fatalf("round %d, after the restart: answered by %v, want %s alone", round, seen, b.name)
		}
		// A kill between the runtime commands and the record of the set
		// that runs (process.Restage) makes the restarted pier reload its
		// adopted HAProxy, to the same members: no error either way.
		t.Logf("round %d: the restarted pier reloaded HAProxy %v times", round, reloadsOK(p))
		old = b
	}
	all := l.stop()
	total := report(t, all)
	t.Logf("pier killed after a member change: %d requests across three kills right after a member change", total)
	requireNoErrors(t, all)
	// A request sent to a stopped member is retried, and answered late:
	// none may be.
	for _, st := range all {
		if st.maxLatency > time.Second {
			t.Errorf("%s/%s: a request took %s: it went to a member that was replaced", st.target, st.profile, st.maxLatency)
		}
	}
}
