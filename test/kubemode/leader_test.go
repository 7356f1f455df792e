package kubemode

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/test/harness"
)

// Lease settings of startController, for the hand-over bound.
const (
	leaseDuration = 4 * time.Second
	retryPeriod   = time.Second
	// client-go waits RetryPeriod×(1+rand·1.2) between attempts (JitterFactor
	// 1.2), both when it notices the last renewal and when it retries after
	// expiry: the worst case after a leader dies is LD + 2×2.2×RP.
	worstHandOver = leaseDuration + 2*retryPeriod*22/10
)

const statusWritten = `msg="ingress status updated"`

// TestLeaderFailover: of two replicas only the Lease holder writes;
// after a SIGKILL of the leader the other takes the Lease, no address
// moves, no Ingress status is rewritten or ever reads empty (polled every
// 100 ms), traffic through the VIP sees no error, and an Ingress created
// during the hand-over is applied by the new leader.
func TestLeaderFailover(t *testing.T) {
	e := newEnv(t)
	e.startAgent()
	ctls := map[string]*proc{"ctl-1": e.startController("ctl-1")}
	e.waitHolder("ctl-1", 20*time.Second)
	ctls["ctl-2"] = e.startController("ctl-2")
	for i, name := range []string{"one", "two"} {
		e.create(e.ingress(name, name+".example", nil))
		e.waitStatus(name, addr(e.internal, i+1)+","+addr(e.public, i+1), time.Minute)
	}
	if n := ctls["ctl-2"].count(statusWritten) + ctls["ctl-2"].count("load balancer stored"); n != 0 {
		t.Errorf("the standby wrote %d Ingress statuses or LoadBalancers", n)
	}
	if n := ctls["ctl-1"].count(statusWritten); n != 2 {
		t.Errorf("the leader logged %d Ingress status writes, want 2", n)
	}
	before := map[string]lbObject{}
	for _, name := range []string{"one", "two"} {
		before[name], _ = e.lbOf(name)
	}
	writes := e.recordWrites()
	poll := e.pollStatus("one", "two")
	stopLoad := startLoad(addr(e.internal, 1), "one.example")

	killed := time.Now()
	ctls["ctl-1"].kill()
	e.create(e.ingress("three", "three.example", nil))
	handOver := e.waitHolder("ctl-2", worstHandOver+2*time.Second).Sub(killed)
	t.Logf("hand-over: ctl-2 acquired the Lease %s after the SIGKILL (LD+RP = %s, client-go worst case %s)",
		handOver.Round(time.Millisecond), leaseDuration+retryPeriod, worstHandOver)
	if handOver > worstHandOver+500*time.Millisecond {
		t.Errorf("hand-over took %s, more than %s", handOver, worstHandOver)
	}
	got := e.waitPublished("three", time.Minute)
	t.Logf("Ingress created during the hand-over published %s %s after the kill", got, time.Since(killed).Round(time.Millisecond))
	if want := addr(e.internal, 3) + "," + addr(e.public, 3); got != want {
		t.Errorf("Ingress three publishes %s, want %s", got, want)
	}
	time.Sleep(time.Second) // let a late wrong write show
	poll.stop()
	for _, r := range stopLoad() {
		t.Logf("load through the VIP during the hand-over: %s", r)
		if r.Transport+r.Unexpected > 0 || r.Requests == 0 {
			t.Errorf("load %s: want requests and 0 errors", r.Name)
		}
	}
	e.checkUnchanged(before, writes, poll)
	if n := ctls["ctl-2"].count(statusWritten); n != 1 {
		t.Errorf("the new leader logged %d Ingress status writes, want 1 (three)", n)
	}
}

// checkUnchanged: the LoadBalancers of before kept their UUID and
// addresses, their Ingresses were not updated, and the poller saw one
// value each and never an empty one.
func (e *env) checkUnchanged(before map[string]lbObject, writes *writeLog, poll *poller) {
	t := e.t
	t.Helper()
	for name, old := range before {
		lb, ok := e.lbOf(name)
		if !ok || lb.Metadata.Name != old.Metadata.Name || lb.Spec.VIP != old.Spec.VIP || lb.Spec.FIP != old.Spec.FIP {
			t.Errorf("LoadBalancer of %s: %s %+v, want %s %s %s", name, lb.Metadata.Name, lb.Spec, old.Metadata.Name, old.Spec.VIP, old.Spec.FIP)
		}
		if u := writes.of(name); len(u) > 0 {
			t.Errorf("Ingress %s updated %d times: %+v", name, len(u), u)
		}
	}
	reads, bad := poll.check()
	t.Logf("status poller: %d reads every 100 ms, flapping: %v", reads, bad)
	if len(bad) > 0 || reads == 0 {
		t.Errorf("Ingress status flapped or was never read: %v", bad)
	}
}

// startLoad runs harness.RunLoad (a keep-alive and a connection-per-request
// client, 20 requests/s each) until the returned stop is called.
func startLoad(ip, host string) (stop func() []harness.LoadResult) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []harness.LoadResult, 1)
	go func() { done <- harness.RunLoad(ctx, ip, echoPort, host, "/", 20) }()
	return func() []harness.LoadResult { cancel(); return <-done }
}

// leaseHolder returns the test Lease's holder and acquire time.
func (e *env) leaseHolder() (string, time.Time, error) {
	l, err := e.cs.CoordinationV1().Leases(leaseNS).Get(e.t.Context(), e.lease, metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	var holder string
	var acquired time.Time
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time
	}
	return holder, acquired, nil
}

// waitHolder polls the Lease every 50 ms until id holds it, and returns
// when id acquired it (the Lease's acquireTime, or now if it has none).
func (e *env) waitHolder(id string, d time.Duration) time.Time {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		holder, acquired, err := e.leaseHolder()
		if err == nil && holder == id {
			if acquired.IsZero() {
				acquired = time.Now()
			}
			return acquired
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("Lease %s: holder %q (%v), want %s within %s", e.lease, holder, err, id, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLeaseDeleted (as ingress-nginx's status e2e): the Lease is
// deleted under the leader. Afterwards one replica leads and holds the
// Lease (a replica that lost it exits, by design, to restart clean), the
// existing Ingress is not rewritten, and a new Ingress is written once.
func TestLeaseDeleted(t *testing.T) {
	e := newEnv(t)
	e.startAgent()
	ctls := []*proc{e.startController("ctl-1")}
	e.waitHolder("ctl-1", 20*time.Second)
	ctls = append(ctls, e.startController("ctl-2"))
	e.create(e.ingress("one", "one.example", nil))
	e.waitStatus("one", addr(e.internal, 1)+","+addr(e.public, 1), time.Minute)
	writes := e.recordWrites()
	poll := e.pollStatus("one")

	if err := e.cs.CoordinationV1().Leases(leaseNS).Delete(t.Context(), e.lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	holders := map[string]bool{}
	for time.Since(deleted) < 2*leaseDuration {
		if h, _, err := e.leaseHolder(); err == nil {
			holders[h] = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	holder, _, err := e.leaseHolder()
	if err != nil {
		t.Fatalf("no Lease %s after %s: %v", e.lease, 2*leaseDuration, err)
	}
	var leading []string
	for _, c := range ctls {
		state := "running"
		if c.exited() {
			state = fmt.Sprintf("exited (%v): %s", c.err, lastLine(c, "pier:"))
		} else if c.count("leading: this replica now allocates") > 0 {
			leading = append(leading, c.name)
			state = "running, leading"
		}
		t.Logf("after the Lease deletion %s is %s", c.name, state)
	}
	t.Logf("Lease holders seen after the deletion: %v; now %s", holders, holder)
	if len(leading) != 1 || leading[0] != holder {
		t.Errorf("replicas leading %v, Lease holder %q: want exactly the holder", leading, holder)
	}

	e.create(e.ingress("two", "two.example", nil))
	e.waitStatus("two", addr(e.internal, 2)+","+addr(e.public, 2), time.Minute)
	time.Sleep(time.Second) // let a second writer show
	poll.stop()
	before := map[string]lbObject{}
	before["one"], _ = e.lbOf("one")
	e.checkUnchanged(before, writes, poll)
	if u := writes.of("two"); len(u) != 1 {
		t.Errorf("Ingress two updated %d times, want 1: %+v", len(u), u)
	}
	e.checkWrittenOnce(ctls, "two")
	if holder == "ctl-1" {
		e.leaseDeletedUnderFrozenLeader(ctls, writes)
	}
}

// leaseDeletedUnderFrozenLeader is the other outcome of a deleted Lease,
// forced: the
// leader ctl-1 is frozen (SIGSTOP, a long GC pause) when its Lease is
// deleted, so ctl-2 creates it and leads, and applies an Ingress created
// meanwhile. Resumed, ctl-1 must step down (exit) without writing: its
// write fence notices the pause and holds every write until a renewal,
// which fails. Without the fence it acted on informers older than the
// store, deleting ctl-2's load balancer of "three" and rewriting its
// status until its renewal failed seconds later.
func (e *env) leaseDeletedUnderFrozenLeader(ctls []*proc, writes *writeLog) {
	t := e.t
	old := ctls[0]
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = old.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	if err := e.cs.CoordinationV1().Leases(leaseNS).Delete(t.Context(), e.lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitHolder("ctl-2", worstHandOver)
	e.create(e.ingress("three", "three.example", nil))
	e.waitStatus("three", addr(e.internal, 3)+","+addr(e.public, 3), time.Minute)
	made, ok := e.lbOf("three")
	if !ok {
		t.Fatal("no LoadBalancer of three while ctl-2 leads")
	}
	// A freeze of a second at least, so its length is no accident of
	// timing: the fence treats any pause over a quarter second as one.
	time.Sleep(time.Second - time.Since(frozen))
	resume()
	select {
	case <-old.done:
		t.Logf("resumed ctl-1 exited: %s", lastLine(old, "pier:"))
	case <-time.After(10 * time.Second):
		t.Errorf("ctl-1 still running 10 s after it resumed without the Lease")
	}
	if h, _, _ := e.leaseHolder(); h != "ctl-2" {
		t.Errorf("Lease holder %q after ctl-1 resumed, want ctl-2", h)
	}
	if old.count("this process was paused") == 0 {
		t.Errorf("resumed ctl-1 did not notice its pause; its log ends:\n%s", old.tail(20))
	}
	if lb, ok := e.lbOf("three"); !ok || lb.Metadata.UID != made.Metadata.UID || lb.Spec.VIP != made.Spec.VIP {
		t.Errorf("LoadBalancer of three after ctl-1 resumed: %s uid %s %+v, want ctl-2's %s uid %s %+v (kept)",
			lb.Metadata.Name, lb.Metadata.UID, lb.Spec, made.Metadata.Name, made.Metadata.UID, made.Spec)
	}
	e.checkWrittenOnce(ctls, "three")
	if u := writes.of("one"); len(u) > 0 {
		t.Errorf("Ingress one updated %d times: %+v", len(u), u)
	}
}

// checkWrittenOnce: Ingress name was written once, by one replica.
func (e *env) checkWrittenOnce(ctls []*proc, name string) {
	e.t.Helper()
	total := 0
	for _, c := range ctls {
		total += c.count(statusWritten, "ingress="+e.ns+"/"+name)
	}
	if total != 1 {
		e.t.Errorf("the replicas logged %d status writes of Ingress %s, want 1", total, name)
	}
}

// lastLine returns the last log line of p containing sub.
func lastLine(p *proc, sub string) string {
	lines := strings.Split(p.tail(200), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return lines[i]
		}
	}
	return ""
}
