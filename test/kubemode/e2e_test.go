package kubemode

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"pier.dev/pier/test/harness"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestEndToEnd: an Ingress of our class becomes a LoadBalancer custom
// resource with its addresses and placement, the agent serves it and
// reports, the Ingress publishes VIP then FIP in one write, traffic
// through both reaches the echo pods, and deleting the Ingress deletes the
// LoadBalancer; its addresses are quarantined, the next Ingress gets others.
func TestEndToEnd(t *testing.T) {
	e := newEnv(t)
	writes := e.recordWrites()
	e.startAgent()
	ctl := e.startController("ctl-1")
	start := time.Now()
	ing := e.create(e.ingress("web", "web.example", nil))

	vip, fip := addr(e.internal, 1), addr(e.public, 1)
	e.waitStatus("web", vip+","+fip, time.Minute)
	t.Logf("Ingress published %s,%s %s after its creation", vip, fip, time.Since(start).Round(time.Millisecond))
	if u := writes.of("web"); len(u) != 1 {
		t.Errorf("Ingress updates %+v, want exactly one (nothing → VIP,FIP)", u)
	}

	lb, ok := e.lbOf("web")
	if !ok {
		t.Fatal("no LoadBalancer names Ingress web among its sources")
	}
	e.checkLoadBalancer(lb, string(ing.UID), vip, fip)
	e.checkPrinterColumns(lb)
	checkTraffic(t, vip, "web.example", 20)
	checkTraffic(t, fip, "web.example", 20)

	// Cluster-scoped LoadBalancers cannot have an Ingress as their
	// garbage-collection owner: the controller deletes them.
	if err := e.cs.NetworkingV1().Ingresses(e.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, 30*time.Second, "LoadBalancer "+lb.Metadata.Name+" deleted", func() error {
		if _, ok := e.lbOf("web"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	t.Logf("LoadBalancer deleted %s after the Ingress", time.Since(deleted).Round(time.Millisecond))
	// The freed addresses are quarantined (--address-quarantine, 10
	// minutes by default, so a squatter's pin cannot take them over at
	// once): another Ingress
	// gets the next ones, and nothing answers on the old VIP for it.
	e.create(e.ingress("web2", "web2.example", nil))
	vip2, fip2 := addr(e.internal, 2), addr(e.public, 2)
	e.waitStatus("web2", vip2+","+fip2, time.Minute)
	checkTraffic(t, vip2, "web2.example", 5)
	e.checkGatewayAPIOffLogged(ctl)
}

func (e *env) checkLoadBalancer(lb lbObject, ingUID, vip, fip string) {
	t := e.t
	t.Helper()
	if !uuidRE.MatchString(lb.Metadata.Name) {
		t.Errorf("LoadBalancer name %q is not a UUID", lb.Metadata.Name)
	}
	s := lb.Spec
	if s.Provider != "haproxy" || s.VIP != vip || s.FIP != fip {
		t.Errorf("LoadBalancer provider %q vip %q fip %q, want haproxy %s %s", s.Provider, s.VIP, s.FIP, vip, fip)
	}
	if s.Placement.Active != activeNode || s.Placement.Standby != "" || s.Placement.RouterID != 0 {
		t.Errorf("placement %+v, want active %s, no standby (one node matches --node-selector) and no router id", s.Placement, activeNode)
	}
	if ip, _ := e.sim.NodeIP(activeNode); s.Placement.ActiveAddress != ip.String() || s.Placement.StandbyAddress != "" {
		t.Errorf("placement addresses %q/%q, want the active node's InternalIP %s and none", s.Placement.ActiveAddress, s.Placement.StandbyAddress, ip)
	}
	if len(s.Sources) != 1 || s.Sources[0].UID != ingUID || s.Sources[0].Namespace != e.ns {
		t.Errorf("sources %+v, want Ingress %s/web uid %s", s.Sources, e.ns, ingUID)
	}
	if refs := lb.Metadata.OwnerReferences; len(refs) != 0 {
		t.Errorf("ownerReferences %+v: a namespaced owner of a cluster-scoped object is invalid (the garbage collector never resolves it)", refs)
	}
	st := lb.Status
	if st.State != "ACTIVE" || st.Node != activeNode || st.SpecHash == "" {
		t.Errorf("status %+v, want ACTIVE on %s with the applied spec hash", st, activeNode)
	}
}

// checkPrinterColumns reads the LoadBalancers as `kubectl get` does (the
// API server's Table rendering of the CRD's additionalPrinterColumns).
func (e *env) checkPrinterColumns(lb lbObject) {
	t := e.t
	t.Helper()
	client, err := rest.HTTPClientFor(e.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.Host()+"/apis/pier.dev/v1alpha1/loadbalancers/"+lb.Metadata.Name, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil || len(table.Rows) != 1 {
		t.Fatalf("table: %v, %d rows: %s", err, len(table.Rows), body)
	}
	want := map[string]string{
		"Name": lb.Metadata.Name, "Provider": "haproxy", "VIP": lb.Spec.VIP, "FIP": lb.Spec.FIP,
		"Active": activeNode, "State": "ACTIVE", "Source": e.ns + "/web",
	}
	got := map[string]string{}
	for i, col := range table.ColumnDefinitions {
		if i < len(table.Rows[0].Cells) {
			got[col.Name] = fmt.Sprint(table.Rows[0].Cells[i])
		}
	}
	for col, v := range want {
		if got[col] != v {
			t.Errorf("kubectl get loadbalancers: column %s = %q, want %q (row %v)", col, got[col], v, got)
		}
	}
	for _, col := range []string{"Standby", "Age"} {
		if _, ok := got[col]; !ok {
			t.Errorf("kubectl get loadbalancers: no column %s (columns %v)", col, table.ColumnDefinitions)
		}
	}
}

// checkTraffic sends n requests to ip:80 for host; every one must reach
// an echo pod of Service echo, and more than one pod must answer.
func checkTraffic(t *testing.T, ip, host string, n int) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	pods := map[string]int{}
	for range n {
		code, reply, _, err := harness.Get(client, ip, echoPort, host, "/")
		if err != nil || code != http.StatusOK || reply.Service != echoSvc {
			t.Fatalf("GET http://%s/ Host %s: %v, status %d, service %q", ip, host, err, code, reply.Service)
		}
		pods[reply.Pod]++
	}
	if n >= 10 && len(pods) < 2 {
		t.Errorf("GET http://%s/ Host %s: every answer from %v, want both echo pods", ip, host, pods)
	}
	t.Logf("%d requests through %s:%s: pods %v", n, ip, strconv.Itoa(echoPort), pods)
}
