package conformance

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// helperCluster is a FilesCluster whose pods are this test binary serving
// the real echo package (see TestMain); pier itself is not started.
func helperCluster(t *testing.T) *FilesCluster {
	t.Helper()
	t.Setenv(envHelper, "echo")
	c, err := NewFilesCluster(FilesConfig{PierBin: os.Args[0], Dir: t.TempDir(), StopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// slicePorts reads the backend manifest of service and returns the echo
// ports its EndpointSlices list.
func slicePorts(t *testing.T, c *FilesCluster, ns, service string) []int32 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.manifests, ns+".service."+service+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ports []int32
	for _, doc := range splitDocs(t, data)[1:] {
		var es discoveryv1.EndpointSlice
		decode(t, doc, &es)
		ports = append(ports, *es.Ports[0].Port)
	}
	return ports
}

// echoAt asks the echo pod on port who it is.
func echoAt(t *testing.T, port int32) (capturedRequest, error) {
	t.Helper()
	resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))) + "/who")
	if err != nil {
		return capturedRequest{}, err
	}
	defer resp.Body.Close()
	var cr capturedRequest
	err = json.NewDecoder(resp.Body).Decode(&cr)
	return cr, err
}

func TestFilesClusterBackends(t *testing.T) {
	c := helperCluster(t)
	ctx := t.Context()
	ns, err := c.NewNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ns, "ingress-conformance-") {
		t.Errorf("namespace %q", ns)
	}

	if err := c.CreateBackend(ctx, ns, "load-balancing", "echo-service", networkingv1.ServiceBackendPort{Number: 8080}, 2); err != nil {
		t.Fatal(err)
	}
	// A second create is a no-op, as for an existing Deployment.
	if err := c.CreateBackend(ctx, ns, "load-balancing", "echo-service", networkingv1.ServiceBackendPort{Number: 9090}, 5); err != nil {
		t.Fatal(err)
	}
	ports := slicePorts(t, c, ns, "echo-service")
	if len(ports) != 2 {
		t.Fatalf("%d endpoints, want 2", len(ports))
	}
	pods := map[string]bool{}
	for _, p := range ports {
		cr, err := echoAt(t, p)
		if err != nil {
			t.Fatalf("pod on %d: %v", p, err)
		}
		if cr.Namespace != ns || cr.Ingress != "load-balancing" || cr.Service != "echo-service" ||
			!strings.HasPrefix(cr.Pod, "load-balancing-echo-service-") {
			t.Errorf("pod on %d reports %+v", p, cr)
		}
		pods[cr.Pod] = true
	}
	if len(pods) != 2 {
		t.Errorf("pod names %v, want 2 distinct", pods)
	}

	if err := c.ScaleBackend(ctx, ns, "load-balancing", "echo-service", 4); err != nil {
		t.Fatal(err)
	}
	scaled := slicePorts(t, c, ns, "echo-service")
	if len(scaled) != 4 || !slices.Equal(scaled[:2], ports) {
		t.Fatalf("after scaling to 4: ports %v, want the first two kept: %v", scaled, ports)
	}
	if err := c.ScaleBackend(ctx, ns, "load-balancing", "echo-service", 1); err != nil {
		t.Fatal(err)
	}
	if got := slicePorts(t, c, ns, "echo-service"); !slices.Equal(got, scaled[:1]) {
		t.Fatalf("after scaling to 1: ports %v, want %v", got, scaled[:1])
	}
	for _, p := range scaled[1:] {
		if _, err := echoAt(t, p); err == nil {
			t.Errorf("removed pod on %d still answers", p)
		}
	}
	if err := c.ScaleBackend(ctx, ns, "other-ingress", "echo-service", 3); err == nil {
		t.Error("scaled a backend through the wrong Ingress")
	}

	if err := c.CreateTLSSecret(ctx, ns, "conformance-tls", []byte("C"), []byte("K")); err != nil {
		t.Fatal(err)
	}
	ing, err := ingressFromSpec("load-balancing", ns, "defaultBackend: {service: {name: echo-service, port: {number: 8080}}}")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateIngress(ctx, ns, ing); err != nil {
		t.Fatal(err)
	}
	files := manifestFiles(t, c)
	want := []string{ns + ".ingress.load-balancing.yaml", ns + ".secret.conformance-tls.yaml", ns + ".service.echo-service.yaml"}
	if !slices.Equal(files, want) {
		t.Errorf("manifests %v, want %v", files, want)
	}
	if staged, _ := os.ReadDir(c.staging); len(staged) != 0 {
		t.Errorf("%d files left in staging", len(staged))
	}

	if err := c.DeleteNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if files := manifestFiles(t, c); len(files) != 0 {
		t.Errorf("manifests left after deleting the namespace: %v", files)
	}
	if _, err := echoAt(t, scaled[0]); err == nil {
		t.Error("pod still answers after its namespace was deleted")
	}
}

func TestFilesClusterRefusals(t *testing.T) {
	c := helperCluster(t)
	ctx := t.Context()
	if err := c.CreateBackend(ctx, "unknown-ns", "i", "s", networkingv1.ServiceBackendPort{Number: 80}, 1); err == nil {
		t.Error("backend in a namespace the cluster did not make")
	}
	ns, _ := c.NewNamespace(ctx)
	if err := c.CreateBackend(ctx, ns, "i", "../escape", networkingv1.ServiceBackendPort{Number: 80}, 1); err == nil {
		t.Error("service name that is not a DNS name accepted")
	}
	if _, err := c.IngressStatus(ctx, ns, "i"); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("status without pier: %v", err)
	}
	if h, s := c.Ports(); h == 0 || s == 0 || h == s {
		t.Errorf("ports %d, %d", h, s)
	}
	args := strings.Join(c.PierArgs(), " ")
	for _, want := range []string{" run -f " + c.manifests, "--state-dir " + c.stateDir, "--http-port ", "--https-port ", "--api-addr 127.0.0.1:"} {
		if !strings.Contains(args, want) {
			t.Errorf("pier command %q lacks %q", args, want)
		}
	}
}

func manifestFiles(t *testing.T, c *FilesCluster) []string {
	t.Helper()
	entries, err := os.ReadDir(c.manifests)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
