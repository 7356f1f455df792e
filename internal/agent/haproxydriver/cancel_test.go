package haproxydriver

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// authSecrets serves htpasswd Secrets by name (auth-file type).
type authSecrets map[string][]byte

func (authSecrets) TLSPair(string, string) ([]byte, []byte, error) { return nil, nil, os.ErrNotExist }
func (s authSecrets) Data(_, name string) (map[string][]byte, error) {
	if b, ok := s[name]; ok {
		return map[string][]byte{htpasswd.FileKey: b}, nil
	}
	return nil, os.ErrNotExist
}

// slowLB is load balancer n with lists userlists of four users at
// bcrypt cost 12, the most encode admits, one per policy: HAProxy
// hashes every user while it checks a set holding it, about 0.2 s each.
func slowLB(t *testing.T, n, lists int, secrets authSecrets) *model.LoadBalancer {
	lb := shardLB(t, n)
	const cost12 = "$2y$12$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	for k := range lists {
		name := fmt.Sprintf("auth-%d-%d", n, k)
		var b strings.Builder
		for u := range 4 {
			fmt.Fprintf(&b, "u%d:%s\n", u, cost12)
		}
		secrets[name] = []byte(b.String())
		users, err := htpasswd.FromSecret(map[string][]byte{htpasswd.FileKey: secrets[name]}, htpasswd.TypeFile)
		if err != nil {
			t.Fatal(err)
		}
		lb.Listeners[0].Policies = append(lb.Listeners[0].Policies, model.L7Policy{
			ID: model.ID("slow", name), Position: k, Action: model.ActionRedirectToPool, PoolID: "p1",
			Rules: []model.L7Rule{{Type: model.RulePath, Compare: model.CompareStartsWith, Value: "/" + name}},
			Options: &model.PolicyOptions{BasicAuth: &model.BasicAuth{Realm: "r", Namespace: "ns", Secret: name,
				Type: htpasswd.TypeFile, SHA256: htpasswd.Digest(users)}},
		})
	}
	return lb
}

// A shard checks a batch of changes at once. When the Apply of one of
// them is cancelled (its load balancer deleted, its spec superseded)
// while the check of a set holding its costly fragment runs, the check
// is killed and the other changes of the batch are loaded without it, at
// once: before, the victim's change waited for the whole check (several
// seconds here, up to process.CheckTimeout) and the reload after it.
func TestCancelledChangeLeavesItsBatch(t *testing.T) {
	needHAProxy(t)
	secrets := authSecrets{}
	d := newSharded(t, harness.ShortTempDir(t), 1)
	d.cfg.Secrets = secrets
	t.Cleanup(func() { d.Close(true) })
	victim := shardLB(t, 1)
	applyAll(t, d, victim)
	slow := slowLB(t, 2, 10, secrets)

	// Both changes wait for the shard's lane, so that one batch takes them.
	changed := victim.Clone()
	changed.Listeners[0].Port = freePort(t)
	dir := d.layout.Shard(0).Dir
	leave := d.enterLane(dir)
	slowCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slowDone, victimDone := make(chan error, 1), make(chan error, 1)
	go func() { _, err := d.Apply(slowCtx, slow); slowDone <- err }()
	go func() { _, err := d.Apply(context.Background(), changed); victimDone <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		n := len(d.waiting[dir])
		d.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d changes wait for the lane, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	leave()
	time.Sleep(500 * time.Millisecond) // the batch's check runs
	start := time.Now()
	cancel()
	select {
	case err := <-victimDone:
		if err != nil {
			t.Fatalf("the victim's change: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatalf("the victim's change is not loaded 4s after the slow change was cancelled: the batch's check ran on")
	}
	t.Logf("the victim's change loaded %v after the slow one was cancelled", time.Since(start).Round(time.Millisecond))
	if err := <-slowDone; err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Errorf("the cancelled Apply returned %v, want its cancellation", err)
	}
	if got := get(changed); got != "lb1" {
		t.Errorf("the victim on its new port: %q", got)
	}
	if inst := d.instance(slow.UUID); inst != nil {
		t.Errorf("the cancelled load balancer runs here")
	}
	if sh := d.shards[dir]; sh != nil {
		if _, listed := sh.lbs[slow.UUID]; listed {
			t.Errorf("the cancelled load balancer is in its shard's file list")
		}
	}
}
