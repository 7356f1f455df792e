package tenants

import (
	"bytes"
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/test/harness"
)

// TestLostStateFileKeepsAddresses: pier.db is lost while pier is down (a
// restore that forgot it, an operator who emptied it) and the state
// folder still holds the load balancers' folders. Meanwhile an attacker
// pins the victim's floating IP and a newcomer appears, both older than
// the victim, so a fresh allocation, oldest first, would hand them the
// victim's FIP and VIP. pier must give the victim its own addresses back
// and refuse the pin, saying why.
func TestLostStateFileKeepsAddresses(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "05-svc.json", append(service(victimNS, victimPort), service(attackerNS, attackerPort)...)...)
	write(t, manifests, "10-victim.json", ingress(victimNS, "site", victimHost, 30, nil))
	o := harness.Options{Manifests: manifests, State: state}
	first := harness.StartPier(t, o)
	before := first.Addresses(victimNS, "site")
	if len(before) != 2 {
		t.Fatalf("victim addresses %v, want a VIP and a FIP", before)
	}
	vip, fip := before[0], before[1]
	expectServed(t, first, fip, victimHost, victimEcho, 2)
	first.Stop()

	// The database is lost (emptied here; TestDamagedStateFileRefused
	// moves one aside); the attack waits for pier to come back.
	if err := os.Truncate(filepath.Join(state, "pier.db"), 0); err != nil {
		t.Fatal(err)
	}
	write(t, manifests, "20-attack.json",
		ingress(attackerNS, "squat", "squat.example", 1, map[string]string{annIP: fip}),
		ingress(attackerNS, "early", "early.example", 2, nil))
	o.API, o.HTTPPort, o.HTTPSPort = first.API, first.HTTPPort, first.HTTPSPort
	p := harness.StartPier(t, o)
	early := p.Addresses(attackerNS, "early")
	if got := p.Addresses(victimNS, "site"); !sameAddresses(got, before) {
		t.Errorf("after the database was lost the victim got %v, had %v", got, before)
	}
	for _, a := range early {
		if a == vip || a == fip {
			t.Errorf("the newcomer got the victim's address %s", a)
		}
	}
	squat := waitProblem(t, p, attackerNS, "squat", "ExternalIPInUse")
	if !strings.Contains(squat.Message, "database was lost") {
		t.Errorf("the pin is refused for another reason: %s", squat.Message)
	}
	t.Logf("squat refused: %s", squat.Message)
	expectServed(t, p, fip, victimHost, victimEcho, 5)
	log, _ := os.ReadFile(p.LogPath)
	if !bytes.Contains(log, []byte("the state file holds no load balancer but the state folder holds some")) {
		t.Error("pier did not warn that its state file was lost")
	}
}

// TestDamagedStateFileRefused: a truncated pier.db (a full disk, a copy
// cut short) made bbolt fault with SIGBUS or panic on every start, with
// hundreds of lines of trace and no word of the file. pier must refuse to
// start with one line that names the file and what to do, and start
// afresh once the file is moved aside.
func TestDamagedStateFileRefused(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.StartEcho(t, victimEcho, "victim-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "05-svc.json", service(victimNS, port)...)
	var ings []runtime.Object
	for i := range 40 {
		ings = append(ings, ingress(victimNS, "site-"+strconv.Itoa(i), "h"+strconv.Itoa(i)+".example", i, nil))
	}
	write(t, manifests, "10-victim.json", ings...)
	o := harness.Options{Manifests: manifests, State: state}
	first := harness.StartPier(t, o)
	first.Addresses(victimNS, "site-39")
	first.Stop()

	db := filepath.Join(state, "pier.db")
	info, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{info.Size() / 2, 12000, 5000} {
		if err := os.Truncate(db, size); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		cmd := osexec.CommandContext(ctx, harness.PierBin(t), "run", "-f", manifests, "--state-dir", state,
			"--api-addr", "127.0.0.1:"+strconv.Itoa(harness.FreePort(t)),
			"--http-port", strconv.Itoa(harness.FreePort(t)), "--https-port", strconv.Itoa(harness.FreePort(t)))
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("pier run on a state file truncated to %d bytes: %v (timed out: %v)\n%s", size, err, timedOut, out)
		}
		text := strings.TrimSpace(string(out))
		last := text[strings.LastIndex(text, "\n")+1:]
		t.Logf("truncated to %d bytes: exit %v: %s", size, err, last)
		if !strings.Contains(last, db) || !strings.Contains(last, "damaged") || !strings.Contains(last, "move it aside") {
			t.Errorf("the last line does not name the file and what to do: %q", last)
		}
		if strings.Contains(text, "goroutine ") || strings.Contains(text, "SIGBUS") || strings.Contains(text, "panic") {
			t.Errorf("pier crashed instead of refusing the file:\n%s", text)
		}
	}

	// Moved aside, as the message says: pier starts with an empty file.
	if err := os.Rename(db, db+".damaged"); err != nil {
		t.Fatal(err)
	}
	p := harness.StartPier(t, o)
	expectServed(t, p, p.Addresses(victimNS, "site-0")[0], "h0.example", victimEcho, 2)
}
