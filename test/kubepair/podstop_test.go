//go:build linux

package kubepair

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// podStop is what the kubelet does to the holder's agent pod in a
// rollout or a `kubectl delete pod`: SIGTERM to the agent, started as the
// chart starts it (--on-exit=handover), then the end of the container,
// which takes HAProxy and keepalived with it. The addresses must be on
// the standby before HAProxy dies (no request fails), the placement and
// the Lease must stay (nothing re-placed), and the agent's next pod comes
// back ready as the hot standby without taking the addresses back.
func podStop(t *testing.T, w *world, vip, fip netip.Addr, holder, other string, placement model.Placement) {
	// The agent on the holder, restarted as a pod runs it. Its default
	// stop moves nothing and HAProxy runs on, so the restart is quiet.
	w.agents[holder].stop(10 * time.Second)
	if err := w.startAgent(holder, "--on-exit=handover"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.waitRoles(15*time.Second, map[string]model.VRRPState{holder: model.VRRPMaster, other: model.VRRPBackup}); err != nil {
		t.Fatal(err)
	}
	agent := w.agents[holder]
	p := w.probe(vip, failureTimeout)
	time.Sleep(500 * time.Millisecond)
	straddle, err := w.straddle(vip)
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := agent.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	// A request on a connection opened before the move ends while the
	// agent stops: its HAProxy must still answer it.
	time.Sleep(200 * time.Millisecond)
	if status, err := straddle.Finish(); err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Errorf("a request straddling the handover: %q, %v; want 200", status, err)
	}
	<-agent.done
	exited := time.Now()
	// The container's end: every process left in it is killed at once.
	// The agent stopped its HAProxy and keepalived itself; a survivor
	// would have been cut mid-request in a pod.
	var killed []string
	for _, comm := range []string{"haproxy", "keepalived"} {
		for _, pid := range lab.PidsIn(w.nodes[holder].NS, comm) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, fmt.Sprintf("%s %d", comm, pid))
			}
		}
	}
	if len(killed) > 0 {
		t.Errorf("still running after the agent's exit, killed as the container's end would: %v", killed)
	}
	if !w.holds(other, vip) || !w.holds(other, fip) {
		t.Errorf("after the agent's exit: VIP holders %v, FIP holders %v, want [%s]",
			w.lab.Holders(vip), w.lab.Holders(fip), other)
	}
	time.Sleep(time.Second) // traffic with only the standby serving
	if !w.agentLeaseExists(holder) {
		t.Errorf("the Lease of %s is gone after a handover on exit: the controller would re-place", holder)
	}

	restarted := time.Now()
	if err := w.startAgent(holder, "--on-exit=handover"); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	ready, err := w.agents[holder].waitStatus("/readyz", http.StatusOK, 30*time.Second)
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	lb, err := w.waitRoles(15*time.Second, map[string]model.VRRPState{holder: model.VRRPBackup, other: model.VRRPMaster})
	time.Sleep(time.Second)
	samples := p.Stop()
	if err != nil {
		t.Fatal(err)
	}
	failed := harness.Failed(samples, time.Time{}, time.Now())
	t.Logf("pod stop: SIGTERM to the agent on %s, exited after %s; the next agent was ready %s after its start; %s; %s",
		holder, exited.Sub(stopped).Round(time.Millisecond), ready.Sub(restarted).Round(time.Millisecond),
		describe(lb), harness.Summary(samples))
	if len(failed) > 0 {
		t.Errorf("%d requests failed across the pod's stop and restart, first %+v", len(failed), failed[0])
	}
	if !reflect.DeepEqual(lb.Placement, placement) {
		t.Errorf("placement moved from %+v to %+v across the pod's stop", placement, lb.Placement)
	}
	if !w.holds(other, vip) {
		t.Errorf("the VIP moved back when the agent returned: holders %v", w.lab.Holders(vip))
	}
	if agent.count("drain: handing the addresses to the standby nodes") == 0 {
		t.Errorf("the stopped agent on %s did not log its handover", holder)
	}
}

// waitStatus waits until the process answers path with code, and returns
// when it did.
func (p *proc) waitStatus(path string, code int, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	last := "no answer"
	for time.Now().Before(deadline) {
		if resp, err := client.Get("http://" + p.api + path); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == code {
				return time.Now(), nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if p.exited() {
			return time.Time{}, fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("%s: %s answered %s within %s, want %d\n%s", p.name, path, last, limit, code, p.tail(30))
}

// agentLeaseExists reports whether node's heartbeat Lease is stored.
func (w *world) agentLeaseExists(node string) bool {
	w.t.Helper()
	_, err := w.cs.CoordinationV1().Leases(leaseNS).Get(w.t.Context(), "pier-agent-"+node, metav1.GetOptions{})
	return err == nil
}
