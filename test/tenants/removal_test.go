package tenants

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/test/harness"
)

// TestRemovedFileFreesAddresses: a file is removed and another written in
// the same scan, so the manifest folder holds as many files as before.
// The removed file's load balancers must stop serving and give their
// addresses back: with a pool of two VIPs that they held, the new
// file's Ingress gets one instead of AddressPoolExhausted.
func TestRemovedFileFreesAddresses(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	oldPort := harness.StartEcho(t, victimEcho, "old-pod")
	newPort := harness.StartEcho(t, attackerEcho, "new-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "05-svc.json", append(service("old", oldPort), service("new", newPort)...)...)
	oldFile := filepath.Join(manifests, "10-old.json")
	write(t, manifests, "10-old.json",
		ingress("old", "one", "one.example", 0, nil), ingress("old", "two", "two.example", 1, nil))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
		// One namespace holds the whole pool here, which the default
		// per-namespace quota (a quarter of the pool) would refuse.
		ExtraArgs: []string{"--internal-pool", "127.31.0.0/31", "--public-pool", "",
			"--address-quarantine", "0", "--max-load-balancers-per-namespace", "0"}})
	held := map[string]string{"one.example": p.Addresses("old", "one")[0], "two.example": p.Addresses("old", "two")[0]}
	for host, vip := range held {
		expectServed(t, p, vip, host, victimEcho, 2)
	}

	// The removal and the new file within microseconds: the watcher waits
	// for a removal to settle, so both are read by one scan.
	newIngress := []runtime.Object{ingress("new", "three", "three.example", 2, nil)}
	if err := os.Remove(oldFile); err != nil {
		t.Fatal(err)
	}
	write(t, manifests, "20-new.json", newIngress...)

	vip := p.Addresses("new", "three")[0]
	expectServed(t, p, vip, "three.example", attackerEcho, 2)
	for _, name := range []string{"one", "two"} {
		harness.WaitFor(t, 10*time.Second, "old/"+name+" gone from the API", func() bool {
			_, err := p.Ingress("old", name)
			return err != nil
		})
	}
	for host, vip := range held {
		harness.WaitFor(t, 10*time.Second, host+" no longer served on "+vip, func() bool {
			code, reply, _, err := harness.Get(client, vip, p.HTTPPort, host, "/")
			return err != nil || (code != 200 && reply.Service != victimEcho)
		})
	}
}
