package kubemode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/test/harness"
	"pier.dev/pier/test/kubeapi"
)

const gatewayController = "pier.dev/gateway-controller"

// TestGatewayAPI: with the Gateway API standard CRDs installed (v1.4.1,
// from the module cache), pier controller (as ServiceAccount
// pier-controller, under deploy/rbac.yaml) accepts its GatewayClass
// (the CRD's default Accepted=Unknown replaced), serves a Gateway through
// HAProxy and publishes its addresses with Programmed=True only then;
// an HTTPRoute it cannot serve is refused with its condition and a
// Warning Event while another keeps serving; a backendRef to another
// namespace is RefNotPermitted until a ReferenceGrant there permits it,
// then served; another controller's parent entry on a route is left as
// it is while pier rewrites its own.
func TestGatewayAPI(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	installGatewayCRDs(t, e)
	gw, err := gwclient.NewForConfig(e.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	backNS := e.ns + "-back"
	e.createNamespaceNamed(backNS)
	t.Cleanup(func() {
		_ = e.cs.CoreV1().Namespaces().Delete(context.Background(), backNS, metav1.DeleteOptions{})
	})
	e.createEchoIn(backNS, "echo2", 1)

	className := createGatewayClass(t, e, gw)
	e.startAgent()
	// Every namespace: the route's backend lives in another one.
	ctl := e.startController("ctl-gw", "--watch-namespace", "")
	start := time.Now()

	eventually(t, time.Minute, "GatewayClass Accepted=True", func() error {
		c, err := gw.GatewayV1().GatewayClasses().Get(ctx, string(className), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return onlyCondition(c.Status.Conditions, "Accepted", metav1.ConditionTrue, c.Generation)
	})
	t.Logf("GatewayClass accepted %s after the controller started", time.Since(start).Round(time.Millisecond))

	created := mustGateway(t, gw, e.ns, className)
	createRoute(t, gw, e.ns, "good", "good.example", echoSvc, "", nil)
	// A value the CRD accepts and pier does not (a header value with
	// "$", which pier never writes to a file) refuses the whole route.
	createRoute(t, gw, e.ns, "bad", "bad.example", echoSvc, "", []gwv1.HTTPRouteFilter{{
		Type:                  gwv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-A", Value: "${HOME}"}}},
	}})
	createRoute(t, gw, e.ns, "cross", "cross.example", "echo2", backNS, nil)

	var vip, fip string
	eventually(t, 2*time.Minute, "Gateway Programmed with its addresses", func() error {
		g, err := gw.GatewayV1().Gateways(e.ns).Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := onlyCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, created.Generation); err != nil {
			return err
		}
		if err := onlyCondition(g.Status.Conditions, "Accepted", metav1.ConditionTrue, created.Generation); err != nil {
			return err
		}
		if len(g.Status.Addresses) != 2 {
			return fmt.Errorf("addresses %+v", g.Status.Addresses)
		}
		vip, fip = g.Status.Addresses[0].Value, g.Status.Addresses[1].Value
		if len(g.Status.Listeners) != 1 || g.Status.Listeners[0].AttachedRoutes != 3 {
			return fmt.Errorf("listeners %+v, want one with 3 attached routes", g.Status.Listeners)
		}
		return onlyCondition(g.Status.Listeners[0].Conditions, "Programmed", metav1.ConditionTrue, created.Generation)
	})
	t.Logf("Gateway programmed on %s, %s %s after the controller started", vip, fip, time.Since(start).Round(time.Millisecond))
	lb := e.gatewayLB("gw")
	if lb.Spec.VIP != vip || lb.Spec.FIP != fip || lb.Status.State != "ACTIVE" {
		t.Errorf("LoadBalancer %s vip %s fip %s state %s, Gateway publishes %s, %s", lb.Metadata.Name, lb.Spec.VIP, lb.Spec.FIP,
			lb.Status.State, vip, fip)
	}
	// Programmed says the Gateway is served; its routes may reach HAProxy
	// a moment later (the conformance suite also retries requests).
	e.waitServed(vip, "good.example")
	checkTraffic(t, vip, "good.example", 20)
	checkTraffic(t, fip, "good.example", 5)

	e.waitRouteCondition(gw, "bad", "Accepted", metav1.ConditionFalse, string(gwv1.RouteReasonUnsupportedValue))
	if code := status(t, vip, "bad.example"); code != http.StatusNotFound {
		t.Errorf("bad.example: %d, want 404 (a refused route is not served)", code)
	}
	e.waitGatewayEvent("HTTPRoute", "bad", string(gwv1.RouteReasonUnsupportedValue))
	checkGatewayAPIServed(t, ctl, e.ns, lb.Metadata.Name)

	e.waitRouteCondition(gw, "cross", "ResolvedRefs", metav1.ConditionFalse, string(gwv1.RouteReasonRefNotPermitted))
	e.waitRouteCondition(gw, "cross", "Accepted", metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	if code := status(t, vip, "cross.example"); code == http.StatusOK {
		t.Errorf("cross.example answered 200 before any ReferenceGrant")
	}
	grant := &gwv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: backNS, Name: "from-" + e.ns},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(e.ns)}},
			To:   []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		}}
	if _, err := gw.GatewayV1beta1().ReferenceGrants(backNS).Create(ctx, grant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	e.waitRouteCondition(gw, "cross", "ResolvedRefs", metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
	eventually(t, 30*time.Second, "cross.example served by echo2", func() error {
		code, reply, _, err := harness.Get(httpClient(), vip, echoPort, "cross.example", "/")
		if err != nil || code != http.StatusOK || reply.Service != "echo2" {
			return fmt.Errorf("%v, status %d, service %q", err, code, reply.Service)
		}
		return nil
	})
	t.Logf("cross-namespace backend served %s after its ReferenceGrant", time.Since(granted).Round(time.Millisecond))
	checkTraffic(t, vip, "good.example", 5)

	e.checkGatewayAddresses(gw, className, vip, fip)
	e.checkForeignParentKept(gw, "good")
	if n := ctl.count("Gateway API support is off"); n != 0 {
		t.Errorf("the controller said %d times that Gateway API support is off, with the CRDs installed", n)
	}
}

// checkGatewayAPIServed: the controller's own API serves the Gateway
// and the refused route with the status it writes, and the load balancer
// the Gateway became (as `pier get gateways` reads them).
func checkGatewayAPIServed(t *testing.T, ctl *proc, ns, lbName string) {
	t.Helper()
	eventually(t, 10*time.Second, "GET /gateways shows the Gateway programmed", func() error {
		var g api.GatewayResponse
		if err := getAPI(ctl, "/gateways/"+ns+"/gw", &g); err != nil {
			return err
		}
		if g.LoadBalancer != lbName || len(g.Status.Addresses) != 2 {
			return fmt.Errorf("loadBalancer %q (want %q), addresses %+v", g.LoadBalancer, lbName, g.Status.Addresses)
		}
		if len(g.Status.Listeners) != 1 || g.Status.Listeners[0].AttachedRoutes != 3 {
			return fmt.Errorf("listeners %+v", g.Status.Listeners)
		}
		return onlyCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, g.Generation)
	})
	var r api.HTTPRouteResponse
	if err := getAPI(ctl, "/httproutes/"+ns+"/bad", &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) == 0 || len(r.Status.Parents) != 1 ||
		onlyCondition(r.Status.Parents[0].Conditions, "Accepted", metav1.ConditionFalse, r.Generation) != nil {
		t.Errorf("GET /httproutes/%s/bad: problems %+v, parents %+v", ns, r.Problems, r.Status.Parents)
	}
}

func getAPI(p *proc, path string, v any) error {
	resp, err := http.Get("http://" + p.api + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// checkGatewayAPIOffLogged: without the Gateway API CRDs (the tests
// that run before TestGatewayAPI installs them), a controller that
// served Ingresses all along said once, not more, that Gateway API
// support is off, and why.
func (e *env) checkGatewayAPIOffLogged(ctl *proc) {
	e.t.Helper()
	_, err := e.cs.Discovery().ServerResourcesForGroupVersion(gwv1.GroupVersion.String())
	if !apierrors.IsNotFound(err) {
		e.t.Logf("Gateway API CRDs installed by an earlier test (%v): nothing to check", err)
		return
	}
	if n := ctl.count("Gateway API support is off", "not installed"); n != 1 {
		e.t.Errorf("the controller said %d times that Gateway API support is off because the CRDs are not installed, want once", n)
	}
}

// installGatewayCRDs applies the standard-channel CRDs of the
// sigs.k8s.io/gateway-api version pier's go.mod requires, from the
// module cache (no copy in the repository).
func installGatewayCRDs(t *testing.T, e *env) {
	t.Helper()
	files, err := kubeapi.GatewayCRDFiles()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := kubeapi.ApplyFiles(ctx, e.srv.Config(), files...); err != nil {
		t.Fatalf("install the Gateway API CRDs: %v", err)
	}
}

// createGatewayClass creates the test's GatewayClass, of pier's
// controller and named after the test's namespace (a class is
// cluster-scoped: one per test), and deletes it when the test ends.
func createGatewayClass(t *testing.T, e *env, gw gwclient.Interface) gwv1.ObjectName {
	t.Helper()
	name := gwv1.ObjectName(e.ns)
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: string(name)},
		Spec: gwv1.GatewayClassSpec{ControllerName: gatewayController}}
	if _, err := gw.GatewayV1().GatewayClasses().Create(t.Context(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = gw.GatewayV1().GatewayClasses().Delete(context.Background(), string(name), metav1.DeleteOptions{})
	})
	return name
}

func mustGateway(t *testing.T, gw gwclient.Interface, ns string, class gwv1.ObjectName) *gwv1.Gateway {
	t.Helper()
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: class,
			Listeners: []gwv1.Listener{{Name: "http", Port: echoPort, Protocol: gwv1.HTTPProtocolType}}}}
	out, err := gw.GatewayV1().Gateways(ns).Create(t.Context(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// createRoute creates HTTPRoute name on Gateway gw for host, to Service
// svc port 80 (of backendNS when set).
func createRoute(t *testing.T, gw gwclient.Interface, ns, name, host, svc, backendNS string, filters []gwv1.HTTPRouteFilter) {
	t.Helper()
	port := gwv1.PortNumber(echoPort)
	ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Name: gwv1.ObjectName(svc), Port: &port}}}
	if backendNS != "" {
		n := gwv1.Namespace(backendNS)
		ref.Namespace = &n
	}
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{ref}, Filters: filters}},
		}}
	if _, err := gw.GatewayV1().HTTPRoutes(ns).Create(t.Context(), r, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HTTPRoute %s: %v", name, err)
	}
}

// onlyCondition checks that cs holds exactly one condition of type typ,
// with status want for generation gen (an Unknown left by the CRD's
// default, or a second condition of the type, fails).
func onlyCondition(cs []metav1.Condition, typ string, want metav1.ConditionStatus, gen int64) error {
	var found []metav1.Condition
	for _, c := range cs {
		if c.Type == typ {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return fmt.Errorf("%d %s conditions in %+v, want one", len(found), typ, cs)
	}
	c := found[0]
	if c.Status != want || c.ObservedGeneration != gen || c.LastTransitionTime.IsZero() {
		return fmt.Errorf("%s=%s/%s observedGeneration %d (want %s for generation %d): %s", typ, c.Status, c.Reason,
			c.ObservedGeneration, want, gen, c.Message)
	}
	return nil
}

// ourParent returns the route's parent entry written by pier.
func ourParent(r *gwv1.HTTPRoute) (gwv1.RouteParentStatus, bool) {
	for _, p := range r.Status.Parents {
		if p.ControllerName == gatewayController {
			return p, true
		}
	}
	return gwv1.RouteParentStatus{}, false
}

func (e *env) waitRouteCondition(gw gwclient.Interface, name, typ string, want metav1.ConditionStatus, reason string) {
	e.t.Helper()
	eventually(e.t, time.Minute, fmt.Sprintf("HTTPRoute %s %s=%s/%s", name, typ, want, reason), func() error {
		r, err := gw.GatewayV1().HTTPRoutes(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p, ok := ourParent(r)
		if !ok {
			return fmt.Errorf("no parent entry of %s in %+v", gatewayController, r.Status.Parents)
		}
		if err := onlyCondition(p.Conditions, typ, want, r.Generation); err != nil {
			return err
		}
		for _, c := range p.Conditions {
			if c.Type == typ && c.Reason != reason {
				return fmt.Errorf("reason %s (%s), want %s", c.Reason, c.Message, reason)
			}
		}
		return nil
	})
}

// waitGatewayEvent waits for a Warning Event with reason on object kind
// name of the test's namespace.
func (e *env) waitGatewayEvent(kind, name, reason string) {
	e.t.Helper()
	eventually(e.t, 30*time.Second, "Event "+reason+" on "+kind+" "+name, func() error {
		list, err := e.cs.CoreV1().Events(e.ns).List(e.t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name,
		})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(list.Items, func(ev corev1.Event) bool {
			return ev.Reason == reason && ev.Type == corev1.EventTypeWarning
		}) {
			return fmt.Errorf("none in %d events", len(list.Items))
		}
		return nil
	})
}

// checkForeignParentKept adds another controller's parent entry to the
// route's status, then changes the route's spec: pier writes its own
// entry for the new generation and leaves the other one as it was.
func (e *env) checkForeignParentKept(gw gwclient.Interface, name string) {
	t := e.t
	t.Helper()
	ctx := t.Context()
	routes := gw.GatewayV1().HTTPRoutes(e.ns)
	other := gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Name: "their-gateway"},
		ControllerName: "example.com/other-controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted",
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}},
	}
	eventually(t, 30*time.Second, "another controller's parent entry written", func() error {
		r, err := routes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Status.Parents = append(r.Status.Parents, other)
		_, err = routes.UpdateStatus(ctx, r, metav1.UpdateOptions{})
		return err
	})
	var gen int64
	eventually(t, 30*time.Second, "route spec changed", func() error {
		r, err := routes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Spec.Hostnames = append(r.Spec.Hostnames, "good2.example")
		out, err := routes.Update(ctx, r, metav1.UpdateOptions{})
		if err == nil {
			gen = out.Generation
		}
		return err
	})
	eventually(t, time.Minute, "pier's entry for the new generation beside the other controller's", func() error {
		r, err := routes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p, ok := ourParent(r)
		if !ok {
			return fmt.Errorf("no entry of ours in %+v", r.Status.Parents)
		}
		if err := onlyCondition(p.Conditions, "Accepted", metav1.ConditionTrue, gen); err != nil {
			return err
		}
		var theirs []gwv1.RouteParentStatus
		for _, p := range r.Status.Parents {
			if p.ControllerName == other.ControllerName {
				theirs = append(theirs, p)
			}
		}
		if len(theirs) != 1 || theirs[0].Conditions[0].ObservedGeneration != 1 || theirs[0].ParentRef.Name != "their-gateway" {
			return fmt.Errorf("the other controller's entries %+v, want the one written, unchanged", theirs)
		}
		return nil
	})
	// Accepted says the route attached; HAProxy serves the new host once
	// the agent applied the change, a moment later.
	vip := e.gatewayLB("gw").Spec.VIP
	e.waitServed(vip, "good2.example")
	checkTraffic(t, vip, "good2.example", 5)
}

// waitServed waits until GET / for host through ip answers 200.
func (e *env) waitServed(ip, host string) {
	e.t.Helper()
	eventually(e.t, 30*time.Second, host+" served through "+ip, func() error {
		if code := status(e.t, ip, host); code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
}

// gatewayLB returns the LoadBalancer whose source is Gateway name.
func (e *env) gatewayLB(name string) lbObject {
	e.t.Helper()
	for _, lb := range e.loadBalancers() {
		for _, s := range lb.Spec.Sources {
			if s.Kind == "Gateway" && s.Namespace == e.ns && s.Name == name {
				return lb
			}
		}
	}
	e.t.Fatalf("no LoadBalancer names Gateway %s/%s among its sources", e.ns, name)
	return lbObject{}
}

func httpClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// status is the status code of GET / for host through ip.
func status(t *testing.T, ip, host string) int {
	t.Helper()
	code, _, _, err := harness.Get(httpClient(), ip, echoPort, host, "/")
	if err != nil {
		t.Fatalf("GET http://%s/ Host %s: %v", ip, host, err)
	}
	return code
}

// checkGatewayAddresses: a second Gateway asking (spec.addresses) for the
// first one's floating IP is Programmed=False/AddressNotUsable with a
// Warning Event while the first keeps serving; moved to a free address of
// the public pool, it is Programmed and publishes that address only,
// where HAProxy answers.
func (e *env) checkGatewayAddresses(gw gwclient.Interface, class gwv1.ObjectName, vip, taken string) {
	t := e.t
	ctx := t.Context()
	ipType := gwv1.IPAddressType
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "pinned"},
		Spec: gwv1.GatewaySpec{GatewayClassName: class,
			Addresses: []gwv1.GatewaySpecAddress{{Type: &ipType, Value: taken}},
			Listeners: []gwv1.Listener{{Name: "http", Port: echoPort, Protocol: gwv1.HTTPProtocolType}}}}
	created, err := gw.GatewayV1().Gateways(e.ns).Create(ctx, g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "Gateway pinned: Programmed=False/AddressNotUsable", func() error {
		g, err := gw.GatewayV1().Gateways(e.ns).Get(ctx, "pinned", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := onlyCondition(g.Status.Conditions, "Accepted", metav1.ConditionTrue, created.Generation); err != nil {
			return err
		}
		c := meta.FindStatusCondition(g.Status.Conditions, "Programmed")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonAddressNotUsable) ||
			!strings.Contains(c.Message, taken) || len(g.Status.Addresses) != 0 {
			return fmt.Errorf("Programmed %+v, addresses %+v", c, g.Status.Addresses)
		}
		return nil
	})
	e.waitGatewayEvent("Gateway", "pinned", string(gwv1.GatewayReasonAddressNotUsable))
	checkTraffic(t, vip, "good.example", 5)
	checkTraffic(t, taken, "good.example", 5)

	free := addr(e.public, 200)
	g, err = gw.GatewayV1().Gateways(e.ns).Get(ctx, "pinned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g.Spec.Addresses[0].Value = free
	updated, err := gw.GatewayV1().Gateways(e.ns).Update(ctx, g, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "Gateway pinned Programmed on "+free, func() error {
		g, err := gw.GatewayV1().Gateways(e.ns).Get(ctx, "pinned", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := onlyCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, updated.Generation); err != nil {
			return err
		}
		if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != free {
			return fmt.Errorf("addresses %+v, want only %s", g.Status.Addresses, free)
		}
		return nil
	})
	// No route: HAProxy itself answers 404 on the pinned address.
	eventually(t, 30*time.Second, "HAProxy answering on "+free, func() error {
		code, _, _, err := harness.Get(httpClient(), free, echoPort, "good.example", "/")
		if err != nil || code != http.StatusNotFound {
			return fmt.Errorf("%v, status %d", err, code)
		}
		return nil
	})
	if err := gw.GatewayV1().Gateways(e.ns).Delete(ctx, "pinned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
