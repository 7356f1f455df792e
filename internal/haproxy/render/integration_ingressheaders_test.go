package render

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	fx "pier.dev/pier/internal/fixture"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// headersIngress is an Ingress of pier's class routing host / to the
// Service web, in the shared group "g".
func headersIngress(name, host string, ann map[string]string) *networkingv1.Ingress {
	ann[annotation.LoadBalancer] = "g"
	ing := fx.Ingress("web", name, "pier", fx.Rule(host, fx.Path("/", networkingv1.PathTypePrefix, "web", 80)))
	ing.Annotations = ann
	return ing
}

// headersSnapshot: three Ingresses on one load balancer, the Service web
// with one endpoint, and the custom-headers ConfigMap.
func headersSnapshot() *source.Snapshot {
	port, proto := int32(8080), corev1.ProtocolTCP
	typed := map[string]string{
		annotation.NginxPrefix + "custom-headers": "security",
		annotation.RequestHeaders:                 "X-Team: blue\n-X-Debug\n",
		annotation.ResponseHeaders:                "-X-Backend-Remove\nX-Backend-Set: typed; v=1\n",
	}
	locked := map[string]string{annotation.NginxPrefix + "custom-headers": "security",
		annotation.NginxPrefix + "whitelist-source-range": "10.0.0.0/8"}
	return &source.Snapshot{
		IngressClasses: []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "pier"},
			Spec: networkingv1.IngressClassSpec{Controller: translate.DefaultControllerName}}},
		Ingresses: []*networkingv1.Ingress{headersIngress("site", "site.test", typed),
			headersIngress("plain", "plain.test", map[string]string{}), headersIngress("locked", "locked.test", locked)},
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80, Protocol: proto}}}}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}}}}},
		ConfigMaps: []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "security"},
			Data: map[string]string{"X-Frame-Options": "DENY", "X-Backend-Set": "from-configmap"}}},
	}
}

// TestIntegrationIngressHeaders: custom-headers and pier.dev/request-,
// response-headers from Ingress to real HAProxy. The backend sees the
// typed request changes; the client sees the ConfigMap's headers and the
// typed response changes (the annotation overriding the ConfigMap for
// the same name); another Ingress's routes on the same load balancer and
// an answer HAProxy makes itself (403) get none of them.
func TestIntegrationIngressHeaders(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	addr, _ := serveHeadersSnapshot(t, bin, headersSnapshot())
	get := func(host, extra string) *http.Response {
		return rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: "+host+"\r\nX-Debug: 1\r\nX-Team: client\r\n"+extra+"\r\n")
	}
	resp := get("site.test", "")
	for name, want := range map[string][]string{
		"X-Req-X-Team": {"blue"}, "X-Req-X-Debug": nil, "X-Frame-Options": {"DENY"},
		"X-Backend-Set": {"typed; v=1"}, "X-Backend-Remove": nil, "X-Backend": {"web"},
	} {
		if got := resp.Header.Values(name); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("site.test %s: %q, want %q", name, got, want)
		}
	}
	resp = get("plain.test", "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Req-X-Team") != "client" || resp.Header.Get("X-Req-X-Debug") != "1" ||
		resp.Header.Get("X-Frame-Options") != "" || resp.Header.Get("X-Backend-Set") != "orig" || resp.Header.Get("X-Backend-Remove") != "yes" {
		t.Errorf("plain.test changed: %d %v", resp.StatusCode, resp.Header)
	}
	resp = get("locked.test", "")
	if resp.StatusCode != 403 || resp.Header.Get("X-Frame-Options") != "" {
		t.Errorf("locked.test: %d %v, want 403 without the ConfigMap's headers", resp.StatusCode, resp.Header)
	}
}

// serveHeadersSnapshot translates snap, which must make one load
// balancer and no problem, points its pools at one filter backend
// (startFilterBackend: it echoes the request's headers as X-Req-*), and
// serves it with real HAProxy: its address, and the load balancer.
func serveHeadersSnapshot(t *testing.T, bin string, snap *source.Snapshot) (string, *model.LoadBalancer) {
	t.Helper()
	res := translate.Ingresses(snap, translate.DefaultOptions())
	if len(res.LoadBalancers) != 1 || len(res.Problems) != 0 {
		t.Fatalf("%d load balancers, problems %+v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	backend := memberAt(startFilterBackend(t, "web"))
	for i := range lb.Pools {
		lb.Pools[i].Members = []model.Member{backend}
	}
	return serveLB(t, bin, lb), lb
}

// ingressHeadersFixture is headersSnapshot as translation makes it: the
// golden file shows the typed changes of custom-headers and pier's
// header annotations beside a source range, and an Ingress without any.
func ingressHeadersFixture() *model.LoadBalancer {
	res := translate.Ingresses(headersSnapshot(), translate.DefaultOptions())
	if len(res.LoadBalancers) != 1 {
		panic("ingress-headers fixture: no load balancer")
	}
	lb := res.LoadBalancers[0]
	lb.UUID, lb.VIP, lb.FIP = fixtureUUID, "10.96.0.10", "203.0.113.10" // IPAM's part
	return lb
}

// TestIntegrationLongestHeaders: the longest header change translation
// accepts (a 128-byte name, a 4 KiB value: encode.MaxHeaderNameLen and
// MaxHeaderValueLen) renders, loads in real HAProxy although the line is
// longer than its 2048-byte first read buffer, and reaches the backend
// and the client whole. CI's fuzzing found translation accepting such a
// value that the renderer then refused.
func TestIntegrationLongestHeaders(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	name := "X-" + strings.Repeat("n", encode.MaxHeaderNameLen-2)
	value := strings.Repeat("v", encode.MaxHeaderValueLen-1) + "!"
	snap := headersSnapshot()
	site := snap.Ingresses[0].Annotations
	site[annotation.RequestHeaders] = name + ": " + value + "\n"
	site[annotation.ResponseHeaders] = name + ": " + value + "\n"
	addr, lb := serveHeadersSnapshot(t, bin, snap)
	out := mustRender(t, lb, nil)
	longest := 0
	for _, line := range strings.Split(string(out.Fragment), "\n") {
		longest = max(longest, len(line))
	}
	if longest <= len(name)+len(value) {
		t.Fatalf("longest line %d bytes: the header change is not in the file", longest)
	}
	resp := rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: site.test\r\n\r\n")
	if got := resp.Header.Get("X-Req-" + name); got != value {
		t.Errorf("backend saw %s of %d bytes, want %d", name, len(got), len(value))
	}
	if got := resp.Header.Get(name); got != value {
		t.Errorf("client got %s of %d bytes, want %d", name, len(got), len(value))
	}
	t.Logf("longest line %d bytes (HAProxy's first buffer 2048, MaxLineBytes %d)", longest, MaxLineBytes)
}

// TestIntegrationHeaderValuesVerbatim: header values with the characters
// HAProxy's config syntax and log-format care about (single quotes, as
// in a Content-Security-Policy, double quotes, as in JSON, '#' and '%',
// a sample expression's "%[src]" included) reach the backend and the
// client byte for byte, from pier's header annotations and from a
// custom-headers ConfigMap.
func TestIntegrationHeaderValuesVerbatim(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	csp := "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.example; img-src * data:"
	reportTo := `{"group":"csp","max_age":10886400,"endpoints":[{"url":"https://r.example/#x"}]}`
	literal := "%[src] #not-a-comment 100% 'x'"
	snap := headersSnapshot()
	site := snap.Ingresses[0].Annotations
	site[annotation.RequestHeaders] = "X-Literal: " + literal + "\nX-Json: " + reportTo + "\n"
	site[annotation.ResponseHeaders] = "Report-To: " + reportTo + "\nX-Literal: " + literal + "\n"
	snap.ConfigMaps[0].Data["Content-Security-Policy"] = csp
	addr, _ := serveHeadersSnapshot(t, bin, snap)
	resp := rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: site.test\r\n\r\n")
	for name, want := range map[string]string{
		"X-Req-X-Literal": literal, "X-Req-X-Json": reportTo, // as the backend saw them
		"Content-Security-Policy": csp, "Report-To": reportTo, "X-Literal": literal,
	} {
		if got := resp.Header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
