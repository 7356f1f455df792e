package kubemode

import (
	"strings"
	"testing"
	"time"
)

// Run from outside a cluster pier is not installed in, `pier controller`
// says once which namespace is missing and which flag fixes it, and exits
// (it once logged a client-go line every 3 s forever).
func TestMissingLeaseNamespace(t *testing.T) {
	e := newEnv(t)
	api := freeAddr(t)
	p := e.start("controller-no-ns", "controller", api, "--kubeconfig", e.srv.Kubeconfig(), "--api-addr", api,
		"--internal-pool", e.internal.String(), "--public-pool", e.public.String(),
		"--lease-namespace", "km-no-such-namespace")
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("pier controller still runs 20 s after starting without its Lease namespace; log:\n%s", p.tail(20))
	}
	if p.err == nil {
		t.Fatal("pier controller exited 0 without its Lease namespace")
	}
	log := p.tail(5)
	for _, want := range []string{`namespace "km-no-such-namespace"`, "does not exist", "--lease-namespace"} {
		if !strings.Contains(log, want) {
			t.Errorf("the exit message lacks %q:\n%s", want, log)
		}
	}
}
