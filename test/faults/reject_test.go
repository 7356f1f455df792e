package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// refusingHAProxy writes a wrapper that runs the real HAProxy, except that
// `haproxy -c` fails while the marker file exists: the fault is injected at
// the boundary, with no change to pier. HAProxy's master re-executes itself
// by its own path, so reloads never pass through the wrapper.
func refusingHAProxy(t *testing.T) (wrapper, marker string) {
	t.Helper()
	real, err := exec.LookPath("haproxy")
	if err != nil {
		real = "/usr/sbin/haproxy"
	}
	dir := harness.ShortTempDir(t)
	wrapper, marker = filepath.Join(dir, "haproxy"), filepath.Join(dir, "refuse")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = "-c" ] && [ -e '%s' ]; then
	echo "[ALERT]    (fault injected by the test) configuration refused" >&2
	exit 1
fi
exec '%s' "$@"
`, marker, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, marker
}

// answeredBy sends n requests and returns which Services answered.
func answeredBy(tg target, n int) map[string]int {
	client := newClient(tg, true)
	out := map[string]int{}
	for range n {
		code, reply, err := send(client, tg)
		switch {
		case err != nil:
			out["error"]++
		case code != 200:
			out[fmt.Sprint(code)]++
		default:
			out[reply.Service]++
		}
	}
	return out
}

// refusal is what the test saw while haproxy -c refused.
type refusal struct {
	status               model.Status
	rejected, rejected3s float64 // refusals when the ERROR showed, and 3 s later
	reloads              float64
	answers              map[string]int
	addresses            []string
}

// refuse makes haproxy -c fail, writes a routing change (/ → Service new),
// and records what pier and HAProxy do about it.
func refuse(t *testing.T, e *env, uuid, marker string, tg target) refusal {
	t.Helper()
	p := e.pier
	rejectedBefore, okBefore := p.Metric("pier_haproxy_config_rejected_total"), reloadsOK(p)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, e.manifests, "reject.yaml", simple("reject", "", "reject.example", "new").yaml())
	var r refusal
	harness.WaitFor(t, 10*time.Second, "the load balancer in ERROR", func() bool {
		cur, err := getLB(p, uuid)
		r.status = cur.Status
		return err == nil && cur.Status.State == model.StateError
	})
	r.rejected = p.Metric("pier_haproxy_config_rejected_total") - rejectedBefore
	time.Sleep(3 * time.Second)
	r.rejected3s = p.Metric("pier_haproxy_config_rejected_total") - rejectedBefore
	r.answers = answeredBy(tg, 20)
	ing, err := p.Ingress(ns, "reject")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ing.Status.LoadBalancer.Ingress {
		r.addresses = append(r.addresses, a.IP)
	}
	r.reloads = reloadsOK(p) - okBefore
	return r
}

// TestConfigRejected: haproxy -c refuses the next config; the old one
// keeps serving, the refusal is visible, and the next change after the
// fault is gone applies.
func TestConfigRejected(t *testing.T) {
	e := newEnv(t)
	for _, svc := range []string{"old", "new"} {
		write(t, e.manifests, svc+"-svc.yaml", backendYAML(svc, pods(startEchos(t, svc, 1))))
	}
	write(t, e.manifests, "reject.yaml", simple("reject", "", "reject.example", "old").yaml())
	wrapper, marker := refusingHAProxy(t)
	p := e.start(nil, "--haproxy", wrapper)
	lb := lbNamed(t, p, ns+"/reject")
	addrs := p.Addresses(ns, "reject")
	hashBefore, okBefore := e.configHash(lb.UUID), reloadsOK(p)
	tg := target{name: "reject", addr: lb.VIP, port: p.HTTPPort, host: "reject.example", path: "/"}

	l := startLoad(tg)
	time.Sleep(500 * time.Millisecond)
	r := refuse(t, e, lb.UUID, marker, tg)
	// Recovery: the fault is gone; the next change must apply.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	next := simple("reject", "", "reject.example", "new")
	next.rules[0].paths["/next"] = "new"
	write(t, e.manifests, "reject.yaml", next.yaml())
	recovered := lbNamed(t, p, ns+"/reject")
	after := answeredBy(tg, 20)
	time.Sleep(500 * time.Millisecond)
	all := l.stop()

	total := report(t, all)
	t.Logf("config rejected: %d requests; while refused: %v refusals (%v 3 s later), %v reloads, status %s %q, answers %v, addresses %v; "+
		"after recovery: %v reloads, status %s, answers %v; config %s → %s",
		total, r.rejected, r.rejected3s, r.reloads, r.status.State, r.status.Message, r.answers, r.addresses,
		reloadsOK(p)-okBefore, recovered.Status.State, after, hashBefore, e.configHash(lb.UUID))
	requireNoErrors(t, all)
	switch {
	case r.rejected < 1:
		t.Errorf("pier_haproxy_config_rejected_total did not grow")
	case r.rejected3s > 2:
		// A refused spec is not retried (agent.errRejected): the next
		// change is what can help. One change, one or two refusals.
		t.Errorf("one refused spec was checked and refused %v times in 3 s: the agent re-applies it in a loop", r.rejected3s)
	}
	if r.reloads != 0 || r.status.Message == "" || r.answers["old"] != 20 || !slices.Equal(r.addresses, addrs) {
		t.Errorf("while refused: want 0 reloads, an ERROR message, the old config (Service old) on 20 of 20 requests "+
			"and the addresses %v kept; got %v reloads, message %q, answers %v, addresses %v",
			addrs, r.reloads, r.status.Message, r.answers, r.addresses)
	}
	if after["new"] != 20 || recovered.Status.State != model.StateActive || reloadsOK(p)-okBefore < 1 {
		t.Errorf("after the fault was removed the next change did not apply: answers %v, status %s, %v reloads",
			after, recovered.Status.State, reloadsOK(p)-okBefore)
	}
}
