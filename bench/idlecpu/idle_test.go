// Package idlecpu measures what `pier controller` costs in Kubernetes mode
// with 1,000 Ingresses once it has settled: CPU while idle, CPU while a
// Service no Ingress refers to keeps changing, CPU and rebuilds while
// agent reports arrive, and the LoadBalancer LISTs the API server served.
// It is not part of the default test run: it skips unless
// PIER_BENCH_IDLE=1, and takes 5 to 15 minutes per binary (client-go rate-limits the controller to 5 writes a second).
//
//	PIER_BENCH_IDLE=1 PIER_BIN=bin/pier PIER_KUBE_APISERVER=… \
//	  go test -count=1 -v -timeout 30m ./bench/idlecpu/
//
// Run it once per binary to compare (a build of the previous commit, then
// this one); the figures are in the test log.
//
// Measured on the 2-core development machine (CPU in 10 ms ticks; LISTs are
// API-server requests for loadbalancers, pages of up to 500 included):
//
//	                                  before (6db49a0)          after
//	1,000 LBs stored                  6m41s                     6m40s
//	settled (no LIST for 5 s)         20m04s, 18,654 ticks,     6m45s, 521 ticks,
//	                                  3,998 LISTs               2 LISTs
//	idle 60 s, once settled           3 ticks, 0 LISTs          4 ticks, 0 LISTs
//	unreferenced Service, 10/s, 30 s  897 ticks (28%), 22       43 ticks (1.3%), 0
//	                                  rebuilds, 180 LISTs       rebuilds, 0 LISTs
//	1,000 agent reports               235 ticks, 43 LISTs       160 ticks, 0 LISTs
//
// Before, every store event (the echo of each of pier's 1,000 creates
// included) was a status pass that LISTed the store, at client-go's 5
// requests a second: 13 minutes of LISTs after the last create.
package idlecpu

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/internal/fixture"
	"pier.dev/pier/test/harness"
	"pier.dev/pier/test/kubeapi"
)

func TestMain(m *testing.M) { kubeapi.Main(m, kubeapi.Options{}) }

const (
	ns        = "bench"
	ingresses = 1000
	clkTck    = 100 // USER_HZ on Linux
)

var lbResource = schema.GroupVersionResource{Group: "pier.dev", Version: "v1alpha1", Resource: "loadbalancers"}

func TestIdleController(t *testing.T) {
	if os.Getenv("PIER_BENCH_IDLE") == "" || os.Getenv("PIER_BIN") == "" {
		t.Skip("set PIER_BENCH_IDLE=1 and PIER_BIN to measure")
	}
	srv := kubeapi.Shared(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	populate(t, ctx, srv, cs)

	start := time.Now()
	pid, api := startController(t, srv.Kubeconfig())
	waitFor(t, 15*time.Minute, "1,000 load balancers", func() bool { return metric(api, "pier_loadbalancers") >= ingresses })
	t.Logf("1,000 load balancers stored in %s, %v rebuilds, %d CPU ticks, %v LoadBalancer LISTs so far",
		time.Since(start).Round(time.Second), metric(api, "pier_rebuilds_total"), ticks(t, pid), apiLists(t, cs))
	rebuilds := settle(t, api, cs)
	t.Logf("settled (no rebuild and no LoadBalancer LIST for 5 s) after %s: %v rebuilds, %d CPU ticks, %v LoadBalancer LISTs",
		time.Since(start).Round(time.Second), rebuilds, ticks(t, pid), apiLists(t, cs))

	lists := apiLists(t, cs)
	before := ticks(t, pid)
	time.Sleep(60 * time.Second)
	t.Logf("idle 60 s: %d CPU ticks (%.2f%% of a core), rebuilds +%v, LoadBalancer LISTs +%v",
		ticks(t, pid)-before, percent(ticks(t, pid)-before, 60*time.Second),
		metric(api, "pier_rebuilds_total")-rebuilds, apiLists(t, cs)-lists)

	// A Service no Ingress refers to, changed every 100 ms for 30 s.
	rebuilds, lists, before = metric(api, "pier_rebuilds_total"), apiLists(t, cs), ticks(t, pid)
	churn(t, ctx, cs, 30*time.Second)
	time.Sleep(2 * time.Second)
	t.Logf("unreferenced Service churn 30 s (+2 s): %d CPU ticks (%.2f%%), rebuilds +%v, LoadBalancer LISTs +%v",
		ticks(t, pid)-before, percent(ticks(t, pid)-before, 32*time.Second),
		metric(api, "pier_rebuilds_total")-rebuilds, apiLists(t, cs)-lists)

	// One report per load balancer, as agents make them.
	rebuilds, lists, before = metric(api, "pier_rebuilds_total"), apiLists(t, cs), ticks(t, pid)
	reportStart := time.Now()
	report(t, ctx, dyn)
	time.Sleep(5 * time.Second)
	t.Logf("1,000 agent reports (%s, +5 s): %d CPU ticks, rebuilds +%v, LoadBalancer LISTs +%v",
		time.Since(reportStart).Round(time.Second), ticks(t, pid)-before,
		metric(api, "pier_rebuilds_total")-rebuilds, apiLists(t, cs)-lists)
}

func populate(t *testing.T, ctx context.Context, srv *kubeapi.Server, cs kubernetes.Interface) {
	t.Helper()
	crd, err := kubeapi.RepoPath("deploy", "crd-loadbalancers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := kubeapi.ApplyFiles(ctx, srv.Config(), crd); err != nil {
		t.Fatal(err)
	}
	must(t, create(ctx, cs.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, create(ctx, cs.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pier-system"}}))
	must(t, create(ctx, cs.NetworkingV1().IngressClasses(), &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "pier"}, Spec: networkingv1.IngressClassSpec{Controller: "pier.dev/ingress-controller"}}))
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	must(t, err)
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	must(t, err)
	for _, name := range []string{"echo", "unreferenced"} {
		must(t, create(ctx, cs.CoreV1().Services(ns), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}))
	}
	ready, port := true, int32(3000)
	must(t, create(ctx, cs.DiscoveryV1().EndpointSlices(ns), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-1", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.244.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Port: &port}},
	}))
	var wg sync.WaitGroup
	errs := make(chan error, ingresses)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < ingresses; i += 8 {
				errs <- create(ctx, cs.NetworkingV1().Ingresses(ns), ingress(i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
}

func ingress(i int) *networkingv1.Ingress {
	return fixture.Ingress("", fmt.Sprintf("ing-%04d", i), "pier",
		fixture.Rule(fmt.Sprintf("h%d.example.com", i), fixture.Path("/", networkingv1.PathTypePrefix, "echo", 80)))
}

type creator[T any] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}

func create[T any](ctx context.Context, c creator[T], obj T) error {
	_, err := c.Create(ctx, obj, metav1.CreateOptions{})
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func startController(t *testing.T, kubeconfig string) (int, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	api := l.Addr().String()
	l.Close()
	cmd := exec.Command(os.Getenv("PIER_BIN"), "controller", "--kubeconfig", kubeconfig, "--api-addr", api,
		"--internal-pool", "10.250.0.0/16", "--public-pool", "", "--watch-namespace", ns,
		"--lease-namespace", "pier-system", "--lease-name", "bench", "--max-ingresses", "2000", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	return cmd.Process.Pid, api
}

// ticks is the process's user+system CPU time in clock ticks.
func ticks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	// Fields after the command name (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

func percent(ticks int64, d time.Duration) float64 {
	return 100 * float64(ticks) / clkTck / d.Seconds()
}

// metric sums a metric's samples on pier's /metrics.
func metric(api, name string) float64 {
	resp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return harness.SumMetric(string(body), name)
}

// apiLists is how many LoadBalancer LISTs the API server has served.
func apiLists(t *testing.T, cs kubernetes.Interface) float64 {
	t.Helper()
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	must(t, err)
	return harness.SumMetric(string(body), "apiserver_request_total", `verb="LIST"`, `resource="loadbalancers"`)
}

// settle waits until neither the rebuild count nor the API server's count
// of LoadBalancer LISTs moves for 5 s (at most 15 minutes): the
// controller has worked off the echoes of its own writes.
func settle(t *testing.T, api string, cs kubernetes.Interface) float64 {
	t.Helper()
	type counts struct{ rebuilds, lists float64 }
	read := func() counts { return counts{metric(api, "pier_rebuilds_total"), apiLists(t, cs)} }
	last, since, deadline := read(), time.Now(), time.Now().Add(15*time.Minute)
	for time.Since(since) < 5*time.Second && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		if n := read(); n != last {
			last, since = n, time.Now()
		}
	}
	return last.rebuilds
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func churn(t *testing.T, ctx context.Context, cs kubernetes.Interface, d time.Duration) {
	t.Helper()
	svcs := cs.CoreV1().Services(ns)
	for i := 0; time.Duration(i)*100*time.Millisecond < d; i++ {
		svc, err := svcs.Get(ctx, "unreferenced", metav1.GetOptions{})
		must(t, err)
		svc.Labels = map[string]string{"round": strconv.Itoa(i)}
		_, err = svcs.Update(ctx, svc, metav1.UpdateOptions{})
		must(t, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// report writes a status message on every LoadBalancer, as agents do
// when they report.
func report(t *testing.T, ctx context.Context, dyn dynamic.Interface) {
	t.Helper()
	res := dyn.Resource(lbResource)
	list, err := res.List(ctx, metav1.ListOptions{})
	must(t, err)
	for i := range list.Items {
		u := &list.Items[i]
		must(t, unstructured.SetNestedField(u.Object, "PENDING", "status", "state"))
		must(t, unstructured.SetNestedField(u.Object, "bench report", "status", "message"))
		_, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		must(t, err)
	}
}
