// Package e2e runs `pier run` as a user would — the real binary, real
// HAProxy, real sockets, manifests in files — and checks traffic through
// the VIPs.
package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// examples copies ../../examples into dir with the example EndpointSlices
// pointed at echo backends started for the test.
func examples(t *testing.T, dir string) {
	t.Helper()
	ports := map[string]int{
		"9001": harness.StartEcho(t, "webservice-1", "webserver-1-pod"),
		"9002": harness.StartEcho(t, "webservice-dev", "webserver-dev-pod"),
		"9003": harness.StartEcho(t, "webservice-qa", "webserver-qa-pod"),
		"9004": harness.StartEcho(t, "webservice-2", "webserver-2-pod"),
	}
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for fixed, port := range ports {
			s = strings.ReplaceAll(s, fixed, strconv.Itoa(port))
		}
		harness.WriteFile(t, filepath.Join(dir, filepath.Base(f)), s)
	}
}

type route struct {
	ingress, host, path, want string // want: a service name or a status code
}

var exampleRoutes = []route{
	{"single-service", "anything.example", "/any/path", "webservice-1"},
	{"single-service", "", "/", "webservice-1"},
	{"simple-fanout", "anything.example", "/dev", "webservice-dev"},
	{"simple-fanout", "anything.example", "/dev/x", "webservice-dev"},
	{"simple-fanout", "anything.example", "/qa/report", "webservice-qa"},
	{"simple-fanout", "anything.example", "/qax", "404"},
	{"simple-fanout", "anything.example", "/prod", "404"},
	{"virtual-hosting", "www.juniper.example", "/", "webservice-1"},
	{"virtual-hosting", "www.cisco.example", "/a/b", "webservice-2"},
	{"virtual-hosting", "WWW.CISCO.EXAMPLE:80", "/", "webservice-2"},
	{"virtual-hosting", "other.example", "/", "webservice-1"},
}

func checkRoutes(t *testing.T, p *harness.Pier, routes []route, addrs map[string][]string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, r := range routes {
		for _, addr := range addrs[r.ingress] { // the VIP and the FIP both serve
			code, reply, hdr, err := harness.Get(client, addr, p.HTTPPort, r.host, r.path)
			got := strconv.Itoa(code)
			if code == 200 {
				got = reply.Service
			}
			if err != nil || got != r.want {
				t.Errorf("%s via %s Host %q %s: got %s (%v), want %s", r.ingress, addr, r.host, r.path, got, err, r.want)
			}
			if hdr.Get("Server") == "" {
				t.Errorf("%s via %s: response has no Server header", r.ingress, addr)
			}
		}
	}
}

func exampleAddresses(p *harness.Pier) map[string][]string {
	out := map[string][]string{}
	for _, name := range []string{"single-service", "simple-fanout", "virtual-hosting"} {
		out[name] = p.Addresses("demo", name)
	}
	return out
}

func TestSeedExamples(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	examples(t, manifests)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	addrs := exampleAddresses(p)
	for name, a := range addrs {
		if len(a) != 2 || !strings.HasPrefix(a[0], "127.10.") || !strings.HasPrefix(a[1], "127.20.") {
			t.Errorf("%s: status addresses %v, want VIP from 127.10/16 then FIP from 127.20/16", name, a)
		}
	}
	checkRoutes(t, p, exampleRoutes, addrs)

	// One folder per load balancer, laid out like the seed's.
	dirs, _ := filepath.Glob(filepath.Join(state, "haproxy", "*", "haproxy.conf"))
	if len(dirs) != 3 {
		t.Errorf("want 3 haproxy.conf files, found %v", dirs)
	}
	checkWorkersUnprivileged(t, state)
}

// checkWorkersUnprivileged: with pier run as root, every HAProxy master
// stays root (it binds and reloads) and its workers, which parse client
// traffic, run as --haproxy-user, "haproxy" by default.
func checkWorkersUnprivileged(t *testing.T, state string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: HAProxy cannot change user, nothing to check")
		return
	}
	want, err := user.Lookup("haproxy")
	if err != nil {
		t.Fatalf("Debian's haproxy package creates the user haproxy: %v", err)
	}
	pidFiles, _ := filepath.Glob(filepath.Join(state, "haproxy", "*", "haproxy.pid"))
	if len(pidFiles) == 0 {
		t.Fatal("no haproxy.pid: nothing checked")
	}
	for _, f := range pidFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		master := strings.TrimSpace(string(b))
		if uid := procUID(t, master); uid != "0" {
			t.Errorf("master %s runs as uid %s, want 0", master, uid)
		}
		workers := childrenOf(t, master)
		if len(workers) == 0 {
			t.Errorf("master %s has no worker", master)
		}
		for _, w := range workers {
			if uid := procUID(t, w); uid != want.Uid {
				t.Errorf("worker %s of master %s runs as uid %s, want haproxy's %s", w, master, uid, want.Uid)
			}
		}
	}
}

// procUID returns the real uid of pid from /proc.
func procUID(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid line for %s", pid)
	return ""
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(t *testing.T, pid string) []string {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces, so split after ")".
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == pid {
			out = append(out, strings.Fields(s)[0])
		}
	}
	return out
}

func TestRestartKeepsAddresses(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	examples(t, manifests)
	first := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	before := exampleAddresses(first)
	first.Stop()

	// A new Ingress appears while pier is down; it must not take anyone's
	// address when pier comes back.
	harness.WriteFile(t, filepath.Join(manifests, "zz-new.yaml"), `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: aaa-new, namespace: demo, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  ingressClassName: pier
  defaultBackend: {service: {name: webservice-2, port: {number: 8888}}}
`)
	second := harness.StartPier(t, harness.Options{Manifests: manifests, State: state, API: first.API,
		HTTPPort: first.HTTPPort, HTTPSPort: first.HTTPSPort})
	after := exampleAddresses(second)
	for name, a := range before {
		if strings.Join(a, ",") != strings.Join(after[name], ",") {
			t.Errorf("%s: addresses %v before restart, %v after", name, a, after[name])
		}
	}
	newAddrs := second.Addresses("demo", "aaa-new")
	for name, a := range before {
		for _, x := range a {
			for _, y := range newAddrs {
				if x == y {
					t.Errorf("new Ingress got %s, which belongs to %s", y, name)
				}
			}
		}
	}
	checkRoutes(t, second, exampleRoutes, after)
}

// TestEditUnderLoad edits manifests while two clients send a few hundred
// requests per second: a route switch (reload) and an endpoint change
// (runtime API, no reload) must fail no request.
func TestEditUnderLoad(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	examples(t, manifests)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses("demo", "simple-fanout")[0]
	fanout, err := os.ReadFile(filepath.Join(manifests, "simple-fanout.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	results := make(chan []harness.LoadResult, 1)
	go func() { results <- harness.RunLoad(ctx, vip, p.HTTPPort, "anything.example", "/dev", 150) }()

	// 1. Endpoint change: a second webservice-dev backend joins.
	time.Sleep(1500 * time.Millisecond)
	reloadsBefore := p.Metric("pier_haproxy_reloads_total", `result="ok"`)
	extra := harness.StartEcho(t, "webservice-dev", "webserver-dev-pod-2")
	withMember := strings.Replace(string(fanout), `  - addresses: ["127.0.0.1"]
    targetRef: {kind: Pod, name: webserver-dev-pod}`, `  - addresses: ["127.0.0.1"]
    targetRef: {kind: Pod, name: webserver-dev-pod}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: webservice-dev-b
  namespace: demo
  labels:
    kubernetes.io/service-name: webservice-dev
addressType: IPv4
ports:
  - port: `+strconv.Itoa(extra)+`
endpoints:
  - addresses: ["127.0.0.1"]
    targetRef: {kind: Pod, name: webserver-dev-pod-2}`, 1)
	if withMember == string(fanout) {
		t.Fatal("could not add a member to the fanout manifest")
	}
	harness.WriteFile(t, filepath.Join(manifests, "simple-fanout.yaml"), withMember)
	harness.WaitFor(t, 5*time.Second, "runtime update", func() bool {
		return p.Metric("pier_haproxy_runtime_updates_total", `result="ok"`) >= 1
	})
	if got := p.Metric("pier_haproxy_reloads_total", `result="ok"`); got != reloadsBefore {
		t.Errorf("an endpoint change reloaded HAProxy (%v reloads, was %v)", got, reloadsBefore)
	}

	// 2. Route change: /dev now goes to webservice-qa (a reload).
	time.Sleep(1500 * time.Millisecond)
	rerouted := strings.Replace(withMember, "name: webservice-dev\n                port:\n                  number: 80",
		"name: webservice-qa\n                port:\n                  name: http", 1)
	if rerouted == withMember {
		t.Fatal("could not re-route /dev")
	}
	harness.WriteFile(t, filepath.Join(manifests, "simple-fanout.yaml"), rerouted)
	harness.WaitFor(t, 5*time.Second, "reload", func() bool {
		return p.Metric("pier_haproxy_reloads_total", `result="ok"`) > reloadsBefore
	})

	var total int
	for _, r := range <-results {
		t.Log(r)
		total += r.Requests
		if r.Transport != 0 || r.Unexpected != 0 {
			t.Errorf("%s: %d transport errors, %d unexpected statuses during edits (first: %s)",
				r.Name, r.Transport, r.Unexpected, r.FirstErr)
		}
		if r.Services["webservice-dev"] == 0 || r.Services["webservice-qa"] == 0 {
			t.Errorf("%s: want answers from webservice-dev before and webservice-qa after the edit, got %v", r.Name, r.Services)
		}
	}
	if total < 1500 {
		t.Errorf("only %d requests in 8s: the load was lower than the test claims", total)
	}
}

// TestInvalidIngressRefusedOthersServe adds a hostile Ingress next to a
// victim under load: the attacker is refused with a reason, the victim's
// config is byte-identical, HAProxy is not reloaded and no victim request
// fails.
func TestInvalidIngressRefusedOthersServe(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	examples(t, manifests)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	addrs := exampleAddresses(p)
	confs, _ := filepath.Glob(filepath.Join(state, "haproxy", "*", "haproxy.conf"))
	before := map[string][]byte{}
	for _, c := range confs {
		before[c], _ = os.ReadFile(c)
	}
	reloads := p.Metric("pier_haproxy_reloads_total")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	results := make(chan []harness.LoadResult, 1)
	go func() {
		results <- harness.RunLoad(ctx, addrs["virtual-hosting"][0], p.HTTPPort, "www.cisco.example", "/", 100)
	}()
	time.Sleep(time.Second)
	harness.WriteFile(t, filepath.Join(manifests, "evil.yaml"), `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: evil
  namespace: attacker
  annotations:
    pier.dev/balance: "roundrobin\n    http-request return status 200 string pwned"
spec:
  ingressClassName: pier
  rules:
    - host: "www.cisco.example"
      http:
        paths:
          - path: "/a' if TRUE #"
            pathType: Prefix
            backend: {service: {name: x, port: {number: 80}}}
`)
	var problems string
	harness.WaitFor(t, 5*time.Second, "the attacker's refusal", func() bool {
		ing, err := p.Ingress("attacker", "evil")
		if err != nil || len(ing.Problems) == 0 {
			return false
		}
		for _, pr := range ing.Problems {
			problems += pr.Reason + ": " + pr.Message + "\n"
		}
		return true
	})
	t.Logf("refusal:\n%s", problems)
	if !strings.Contains(problems, "InvalidAnnotation") {
		t.Errorf("want an InvalidAnnotation refusal, got %s", problems)
	}
	if ing, _ := p.Ingress("attacker", "evil"); ing != nil && len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("a refused Ingress published an address: %v", ing.Status.LoadBalancer.Ingress)
	}
	for _, r := range <-results {
		t.Log(r)
		if r.Transport != 0 || r.Unexpected != 0 || r.Services["webservice-2"] != r.Requests {
			t.Errorf("victim traffic disturbed: %s", r)
		}
	}
	after, _ := filepath.Glob(filepath.Join(state, "haproxy", "*", "haproxy.conf"))
	if len(after) != len(confs) {
		t.Errorf("load balancers changed: %v → %v", confs, after)
	}
	for _, c := range confs {
		if b, _ := os.ReadFile(c); !bytes.Equal(b, before[c]) {
			t.Errorf("%s changed", c)
		}
	}
	if got := p.Metric("pier_haproxy_reloads_total"); got != reloads {
		t.Errorf("HAProxy reloaded or restarted: %v → %v", reloads, got)
	}
	for _, name := range []string{"pwned", "TRUE"} {
		out, _ := harness.Exec("grep", "-rl", name, state)
		if strings.Contains(out, ".conf") {
			t.Errorf("attacker text %q reached a HAProxy file: %s", name, out)
		}
	}
}
