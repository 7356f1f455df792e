package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// TestGatewayExample serves examples/gateway/gateway.yaml through `pier
// run` (real binary, real HAProxy): the Gateway gets its own load
// balancer and VIP, and requests to the VIP on the listener's port reach
// the backend its HTTPRoute names, by host and path.
func TestGatewayExample(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	b, err := os.ReadFile("../../examples/gateway/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The listener's port is the Gateway's own: a free one, so parallel
	// runs of pier on this machine (same first VIP) do not collide.
	port := harness.FreePort(t)
	s := strings.Replace(string(b), "port: 8000", "port: "+strconv.Itoa(port), 1)
	s = strings.ReplaceAll(s, "9001", strconv.Itoa(harness.StartEcho(t, "webservice-1", "webserver-1-pod")))
	s = strings.ReplaceAll(s, "9004", strconv.Itoa(harness.StartEcho(t, "webservice-2", "webserver-2-pod")))
	harness.WriteFile(t, filepath.Join(manifests, "gateway.yaml"), s)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})

	var lb *model.LoadBalancer
	harness.WaitFor(t, 20*time.Second, "the Gateway's load balancer serves", func() bool {
		lb = gatewayLB(t, p, "demo", "web")
		return lb != nil && lb.VIP != "" && lb.Status.State == model.StateActive
	})
	if lb.Provider != model.ProviderHAProxy || len(lb.Listeners) != 1 || lb.Listeners[0].Port != port {
		t.Fatalf("load balancer %s: provider %s, listeners %+v", lb.Name, lb.Provider, lb.Listeners)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, addr := range []string{lb.VIP, lb.FIP} {
		for _, r := range []struct{ host, path, want string }{
			{"shop.example", "/", "webservice-1"},
			{"shop.example", "/cart/1", "webservice-1"},
			{"shop.example", "/blog", "webservice-2"},
			{"shop.example", "/blog/post", "webservice-2"},
			{"SHOP.example:80", "/blog/post", "webservice-2"},
			{"shop.example", "/blogx", "webservice-1"},
			{"other.example", "/blog", "404"},
		} {
			code, reply, _, err := harness.Get(client, addr, port, r.host, r.path)
			got := strconv.Itoa(code)
			if code == 200 {
				got = reply.Service
			}
			if err != nil || got != r.want {
				t.Errorf("via %s:%d Host %q %s: got %s (%v), want %s", addr, port, r.host, r.path, got, err, r.want)
			}
		}
	}
}

// gatewayLB finds the load balancer whose source is the Gateway ns/name.
func gatewayLB(t *testing.T, p *harness.Pier, ns, name string) *model.LoadBalancer {
	t.Helper()
	resp, err := http.Get("http://" + p.API + "/loadbalancers")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Items []*model.LoadBalancer `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil
	}
	for _, lb := range list.Items {
		for _, s := range lb.Sources {
			if s.Kind == model.KindGateway && s.Namespace == ns && s.Name == name {
				return lb
			}
		}
	}
	return nil
}
