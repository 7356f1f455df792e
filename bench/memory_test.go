package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/test/harness"
)

// memoryPair is one idle HAProxy master-worker pair.
type memoryPair struct {
	Name      string    `json:"name"`
	Policies  int       `json:"policies"`
	Procs     []procMem `json:"procs"`
	RSSKiB    int       `json:"rss_kib"`     // master + worker VmRSS
	PssKiB    int       `json:"pss_kib"`     // master + worker Pss
	PrivKiB   int       `json:"private_kib"` // master + worker private pages
	ConfBytes int       `json:"config_bytes"`
}

type memoryResult struct {
	Pairs   []memoryPair `json:"pairs"`
	IdleSec float64      `json:"idle_s"`
	LoadAvg float64      `json:"load_avg"`
}

func sumPair(name string, policies int, procs []procMem, conf string) memoryPair {
	p := memoryPair{Name: name, Policies: policies, Procs: procs}
	for _, m := range procs {
		p.RSSKiB += m.VmRSSKiB
		p.PssKiB += m.PssKiB
		p.PrivKiB += m.PrivKiB
	}
	if b, err := os.ReadFile(conf); err == nil {
		p.ConfBytes = len(b)
	}
	return p
}

// TestMemory reads the memory of the idle HAProxy pairs `pier run` starts
// for a one-route Ingress and for the 50-policy data-plane Ingress, and of
// the reference config started by the same driver: VmRSS as asked, plus
// Pss and private pages, which do not count shared pages twice.
func TestMemory(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy")
	const idle = 3 * time.Second
	echoPort := harness.StartEcho(t, reloadService, "app-pod")
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)

	objs := []runtime.Object{IngressClass()}
	svc, es := Backend(reloadNS, reloadService, int32(echoPort), "127.0.0.1")
	objs = append(objs, svc, es, Ingress(reloadNS, "one-route", 0, Rule(reloadHost, Prefix("/", reloadService))))
	shop := DataPlaneSnapshot(int32(echoPort), int32(echoPort))
	for _, s := range shop.Services {
		objs = append(objs, s)
	}
	for _, s := range shop.EndpointSlices {
		objs = append(objs, s)
	}
	objs = append(objs, shop.Ingresses[0])
	harness.WriteFile(t, filepath.Join(manifests, "objects.json"), manifestList(t, objs...))

	// One HAProxy process per load balancer: what one load balancer costs
	// on its own (shards, the default, are measured in shards_test.go).
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
		ExtraArgs: []string{"--haproxy-processes", "0"}})
	p.Addresses(reloadNS, "one-route")
	p.Addresses(shop.Ingresses[0].Namespace, shop.Ingresses[0].Name)

	root := harness.ShortTempDir(t)
	refDir := filepath.Join(root, "ref")
	if err := os.Mkdir(refDir, 0o700); err != nil {
		t.Fatal(err)
	}
	refCfg := filepath.Join(refDir, "haproxy.conf")
	ref := ReferenceConfig("127.0.0.1:"+strconv.Itoa(harness.FreePort(t)), "127.0.0.1:"+strconv.Itoa(echoPort))
	if err := os.WriteFile(refCfg, ref, 0o600); err != nil {
		t.Fatal(err)
	}
	refInst := startHAProxy(t, refDir, refCfg)
	time.Sleep(idle)

	res := memoryResult{IdleSec: idle.Seconds(), LoadAvg: loadAvg()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lbs, err := api.ListLoadBalancers(ctx, p.API)
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) != 2 {
		t.Fatalf("%d load balancers, want 2", len(lbs))
	}
	for _, lb := range lbs {
		dir := filepath.Join(state, "haproxy", lb.UUID)
		b, err := os.ReadFile(filepath.Join(dir, "haproxy.pid"))
		if err != nil {
			t.Fatal(err)
		}
		master, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		pair := sumPair("pier "+lb.Name, len(lb.Listeners[0].Policies), pairMem(t, master), filepath.Join(dir, "haproxy.conf"))
		res.Pairs = append(res.Pairs, pair)
	}
	res.Pairs = append(res.Pairs, sumPair("reference", 0, pairMem(t, refInst.PID()), refCfg))
	for _, pair := range res.Pairs {
		t.Logf("%-22s %2d policies: RSS %6.1f MiB, Pss %6.1f MiB, private %6.1f MiB %+v", pair.Name, pair.Policies,
			float64(pair.RSSKiB)/1024, float64(pair.PssKiB)/1024, float64(pair.PrivKiB)/1024, pair.Procs)
	}
	writeJSON(t, out, "memory.json", res)
}
