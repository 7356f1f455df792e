package faults

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/echo"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// env is a manifest folder and a state dir, and the pier running on them.
type env struct {
	t                *testing.T
	manifests, state string
	pier             *harness.Pier
}

// newEnv makes the folders, writes the IngressClass, and makes sure no
// HAProxy started below the state dir outlives the test, whatever pier did
// (a killed pier leaves its HAProxy running on purpose).
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, manifests: harness.ShortTempDir(t), state: harness.ShortTempDir(t)}
	t.Cleanup(func() { killLeftovers(t, e.state) })
	write(t, e.manifests, "00-class.yaml", ingressClass)
	return e
}

// start runs pier on the env's folders; ports and API of a previous pier
// are reused when given, so a restart serves the same sockets.
//
// These faults are aimed at one load balancer's HAProxy (its master, its
// workers, its config hash), so pier runs one HAProxy process per load
// balancer here (--haproxy-processes 0). The default, shards, is faulted
// in internal/agent/haproxydriver (TestShardsRestartedOnce and the driver
// contract) and served by test/e2e, test/conformance and the pair suites.
func (e *env) start(prev *harness.Pier, extra ...string) *harness.Pier {
	e.t.Helper()
	extra = append([]string{"--haproxy-processes", "0"}, extra...)
	o := harness.Options{Manifests: e.manifests, State: e.state, ExtraArgs: extra}
	if prev != nil {
		o.API, o.HTTPPort, o.HTTPSPort = prev.API, prev.HTTPPort, prev.HTTPSPort
	}
	e.pier = harness.StartPier(e.t, o)
	return e.pier
}

// echoBackend is a pier echo server that the test may stop on its own.
type echoBackend struct {
	pod
	stop func()
}

func startEcho(t *testing.T, svc, name string) *echoBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cfg := echo.Config{Namespace: ns, Service: svc, Pod: name}
		_ = echo.Serve(ctx, l, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	b := &echoBackend{pod: pod{name: name, port: l.Addr().(*net.TCPAddr).Port}}
	b.stop = func() { cancel(); <-done }
	t.Cleanup(b.stop)
	return b
}

func startEchos(t *testing.T, svc string, n int) []*echoBackend {
	out := make([]*echoBackend, n)
	for i := range out {
		out[i] = startEcho(t, svc, fmt.Sprintf("%s-%d", svc, i))
	}
	return out
}

func pods(bs []*echoBackend) []pod {
	out := make([]pod, len(bs))
	for i, b := range bs {
		out[i] = b.pod
	}
	return out
}

// loadBalancers reads GET /loadbalancers.
func loadBalancers(p *harness.Pier) ([]model.LoadBalancer, error) {
	resp, err := http.Get("http://" + p.API + "/loadbalancers")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Items []model.LoadBalancer `json:"items"`
	}
	return out.Items, json.NewDecoder(resp.Body).Decode(&out)
}

// lbNamed waits until the LoadBalancer of that display name ("ns/name" or
// "group:<namespace>/<name>") serves its current spec, and returns it.
func lbNamed(t *testing.T, p *harness.Pier, name string) model.LoadBalancer {
	t.Helper()
	var found model.LoadBalancer
	harness.WaitFor(t, 20*time.Second, "load balancer "+name+" serving", func() bool {
		lbs, err := loadBalancers(p)
		for _, lb := range lbs {
			if err == nil && lb.Name == name && lb.Serving() {
				found = lb
				return true
			}
		}
		return false
	})
	return found
}

// getLB reads GET /loadbalancers/{uuid}.
func getLB(p *harness.Pier, uuid string) (model.LoadBalancer, error) {
	var lb model.LoadBalancer
	resp, err := http.Get("http://" + p.API + "/loadbalancers/" + uuid)
	if err != nil {
		return lb, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return lb, fmt.Errorf("GET /loadbalancers/%s: %s", uuid, resp.Status)
	}
	return lb, json.NewDecoder(resp.Body).Decode(&lb)
}

func (e *env) lbDir(uuid string) string { return filepath.Join(e.state, "haproxy", uuid) }

// configHash is the short sha256 of a load balancer's rendered haproxy.conf.
func (e *env) configHash(uuid string) string {
	b, err := os.ReadFile(filepath.Join(e.lbDir(uuid), "haproxy.conf"))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

// reloads is every reload pier counted, whatever its result: "ok",
// "failed", and "started" (a start or an adoption).
func reloads(p *harness.Pier) float64 { return p.Metric("pier_haproxy_reloads_total") }

func reloadsOK(p *harness.Pier) float64 {
	return p.Metric("pier_haproxy_reloads_total", `result="ok"`)
}

func runtimeUpdates(p *harness.Pier) float64 {
	return p.Metric("pier_haproxy_runtime_updates_total", `result="ok"`)
}

// haproxyProcs lists the live HAProxy processes started with dir's master
// socket: the master and its workers, current and old. The master pid is
// read from dir/haproxy.pid. `haproxy -c` runs do not carry -S and are not
// counted.
func haproxyProcs(dir string) (master int, workers []int) {
	b, _ := os.ReadFile(filepath.Join(dir, "haproxy.pid"))
	master, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	sock := filepath.Join(dir, "master.sock") + ","
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == master {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmd), "\x00"+sock) || zombie(pid) {
			continue
		}
		workers = append(workers, pid)
	}
	if zombie(master) || syscall.Kill(master, 0) != nil {
		master = 0
	}
	return master, workers
}

func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) == 0 || fields[0] == "Z"
}

// killLeftovers SIGKILLs, by pid, every HAProxy started below state that is
// still running after pier's own cleanup.
func killLeftovers(t *testing.T, state string) {
	dirs, _ := filepath.Glob(filepath.Join(state, "haproxy", "*"))
	for _, dir := range dirs {
		master, workers := haproxyProcs(dir)
		for _, pid := range append(workers, master) {
			if pid > 0 {
				t.Logf("killing leftover haproxy %d of %s", pid, filepath.Base(dir))
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// lbState is "STATE (message)" from GET /loadbalancers/{uuid}.
func lbState(p *harness.Pier, uuid string) string {
	lb, err := getLB(p, uuid)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s (%q, serving current spec: %v)", lb.Status.State, lb.Status.Message, lb.Serving())
}
