package badinput

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// Two namespaces claim shared.example/ in one pier.dev/load-balancer
// group. The older Ingress wins although its namespace sorts last, so the
// test tells "oldest" from "first by name".
const (
	oldNS, newNS = "evil-zz-old", "evil-aa-new"
	oldEcho      = "conflict-old-app"
	newEcho      = "conflict-new-app"
	sharedHost   = "shared.example"
	// sharedConflict lets both namespaces share the group: without it each
	// would get a load balancer of its own (naming another namespace's
	// group does not join it).
	sharedConflict = "--shared-load-balancer=conflict=" + oldNS + "," + newNS
)

func conflictObjects(oldPort, newPort int) []runtime.Object {
	var objs []runtime.Object
	for _, c := range []struct {
		ns   string
		port int
		year int
	}{{oldNS, oldPort, 2020}, {newNS, newPort, 2021}} {
		ing := ingress(c.ns, "evil", sharedHost, "/")
		ing.Spec.Rules[0].HTTP.Paths[0].PathType = &pathPrefix
		ing.Annotations = map[string]string{annGroup: "conflict"}
		ing.CreationTimestamp = metav1.NewTime(time.Date(c.year, 1, 1, 0, 0, 0, 0, time.UTC))
		objs = append(objs, ing)
		objs = append(objs, service(c.ns, "app", c.port)...)
	}
	return objs
}

// checkWinner checks the conflict's verdict through p: the old Ingress
// serves every request, the new one carries a RouteConflict naming it.
func checkWinner(t *testing.T, p *harness.Pier, vip string, requests int) {
	t.Helper()
	loser, err := p.Ingress(newNS, "evil")
	if err != nil {
		t.Fatal(err)
	}
	pr := findProblem(loser.Problems, model.SeverityWarning, "RouteConflict")
	if pr == nil || !strings.Contains(pr.Message, oldNS+"/evil") {
		t.Errorf("want a RouteConflict on %s naming %s/evil; problems: %s", newNS, oldNS, problemList(loser.Problems))
	}
	if winner, err := p.Ingress(oldNS, "evil"); err != nil || len(winner.Problems) != 0 {
		t.Errorf("the winner has problems (err %v): %v", err, winner)
	}
	// After a restart the status is kept (never cleared) while HAProxy
	// starts again: wait for it, but no answer may come from the loser.
	harness.WaitFor(t, 10*time.Second, "HAProxy serving "+sharedHost, func() bool {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, sharedHost, "/")
		if err == nil && reply.Service == newEcho {
			t.Fatalf("the loser %s answered", newNS)
		}
		return err == nil && code == 200
	})
	for i := range requests {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, sharedHost, "/")
		if err != nil || code != 200 || reply.Service != oldEcho {
			t.Fatalf("request %d: status %d from %q (%v), want %s every time", i, code, reply.Service, err, oldEcho)
		}
	}
}

// runConflict is the path conflict in the shared run: winner, loser's warning, victim
// untouched.
func (b *bench) runConflict(t *testing.T) {
	oldPort, newPort := harness.StartEcho(t, oldEcho, "old-pod"), harness.StartEcho(t, newEcho, "new-pod")
	before := b.reloads()
	b.launch(t, &attack{ns: oldNS, objs: conflictObjects(oldPort, newPort)}, "evil")
	_, vip := b.awaitServed(t, oldNS, "evil")
	_, loserVIP := b.awaitServed(t, newNS, "evil")
	if loserVIP != vip {
		t.Errorf("the group's Ingresses publish %s and %s, want one VIP", vip, loserVIP)
	}
	checkWinner(t, b.p, vip, 20)
	b.checkIsolated(t, before, 1, servedMarkers)
}

// TestConflictWinnerSurvivesRestart restarts pier on the same state dir: the
// same Ingress wins, on the same VIP, with no other answer in between.
func TestConflictWinnerSurvivesRestart(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	oldPort, newPort := harness.StartEcho(t, oldEcho, "old-pod"), harness.StartEcho(t, newEcho, "new-pod")
	harness.WriteFile(t, filepath.Join(manifests, "00-class.json"), string(list(t, ingressClass())))
	harness.WriteFile(t, filepath.Join(manifests, "conflict.json"), string(list(t, conflictObjects(oldPort, newPort)...)))

	var vips []string
	o := harness.Options{Manifests: manifests, State: state, ExtraArgs: []string{sharedConflict}}
	for run := range 2 {
		p := harness.StartPier(t, o)
		o.API, o.HTTPPort, o.HTTPSPort = p.API, p.HTTPPort, p.HTTPSPort // the same pier again
		vip := p.Addresses(oldNS, "evil")[0]
		p.Addresses(newNS, "evil")
		checkWinner(t, p, vip, 50)
		vips = append(vips, vip)
		t.Logf("run %d: %s/evil wins on %s", run+1, oldNS, vip)
		p.Stop()
	}
	if vips[0] != vips[1] {
		t.Errorf("the group's VIP moved across the restart: %v", vips)
	}
}
