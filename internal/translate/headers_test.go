package translate

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

func headersConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// custom-headers and pier.dev/request-headers, -response-headers: the
// policy of the Ingress asking carries the typed changes, another Ingress
// of the same load balancer none; an invalid name or value refuses that
// Ingress only, naming the annotation (and the ConfigMap key).
func TestHeaderAnnotations(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shared"}
	run := func(ann map[string]string, cms ...*corev1.ConfigMap) *Result {
		a := simpleIngress(t, "ns", "private", 0, ann, "a.example", "/admin")
		b := simpleIngress(t, "ns", "public", 1, group, "a.example", "/")
		snap := snapshotOf(a, b)
		snap.ConfigMaps = cms
		return Ingresses(snap, DefaultOptions())
	}
	cm := headersConfigMap("ns", "hdrs", map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store, max-age=0"})
	ann := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "custom-headers": "ns/hdrs",
		annotation.RequestHeaders:  "X-Team: blue\n-X-Debug\n",
		annotation.ResponseHeaders: "X-Frame-Options: SAMEORIGIN\n-Server",
	}
	lb := onlyLB(t, run(ann, cm))
	wantReq := []model.HeaderOp{{Op: model.HeaderSet, Name: "X-Team", Value: "blue"}, {Op: model.HeaderRemove, Name: "X-Debug"}}
	wantRes := []model.HeaderOp{{Op: model.HeaderSet, Name: "Cache-Control", Value: "no-store, max-age=0"},
		{Op: model.HeaderSet, Name: "X-Frame-Options", Value: "SAMEORIGIN"}, {Op: model.HeaderRemove, Name: "Server"}}
	for _, p := range lb.Listeners[0].Policies {
		if p.Source.Name != "private" {
			if p.Options != nil {
				t.Errorf("public: options %+v", p.Options)
			}
			continue
		}
		if p.Options == nil || !reflect.DeepEqual(p.Options.RequestHeaders, wantReq) || !reflect.DeepEqual(p.Options.ResponseHeaders, wantRes) {
			t.Errorf("private: options %+v", p.Options)
		}
	}
	// The ConfigMap by name alone, in the Ingress's namespace.
	lb = onlyLB(t, run(map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "custom-headers": "hdrs"}, cm))
	for _, p := range lb.Listeners[0].Policies {
		if p.Source.Name == "private" && (p.Options == nil || len(p.Options.ResponseHeaders) != 2) {
			t.Errorf("by name: options %+v", p.Options)
		}
	}

	refused := func(name string, ann map[string]string, key, msg string, cms ...*corev1.ConfigMap) {
		t.Helper()
		ann[annotation.LoadBalancer] = "shared"
		res := run(ann, cms...)
		lb := onlyLB(t, res)
		for _, p := range lb.Listeners[0].Policies {
			if p.Source.Name == "private" {
				t.Errorf("%s: the Ingress is served", name)
			}
		}
		ps := problemsFor(res, "private")
		if len(ps) != 1 || ps[0].Severity != model.SeverityError || ps[0].Field != fieldForAnnotation(key) || !strings.Contains(ps[0].Message, msg) {
			t.Errorf("%s: problems %+v", name, ps)
		}
		if len(problemsFor(res, "public")) != 0 {
			t.Errorf("%s: public has problems", name)
		}
	}
	ch := annotation.NginxPrefix + "custom-headers"
	refused("evil name", map[string]string{annotation.ResponseHeaders: "X-A;evil: b"}, annotation.ResponseHeaders, "line 1")
	refused("CRLF", map[string]string{annotation.RequestHeaders: "X-A: b\r\nX-Evil: c"}, annotation.RequestHeaders, "line 1")
	refused("both quotes", map[string]string{annotation.RequestHeaders: `X-A: 'b' "c"`}, annotation.RequestHeaders, "header value")
	refused("dollar", map[string]string{annotation.RequestHeaders: "X-A: ${HOME}"}, annotation.RequestHeaders, "header value")
	refused("backslash", map[string]string{annotation.RequestHeaders: `X-A: a\nb`}, annotation.RequestHeaders, "header value")
	refused("framing", map[string]string{annotation.ResponseHeaders: "Content-Length: 1"}, annotation.ResponseHeaders, "reserved")
	refused("host", map[string]string{annotation.RequestHeaders: "Host: b.example"}, annotation.RequestHeaders, "reserved")
	refused("twice", map[string]string{annotation.RequestHeaders: "X-A: 1\nx-a: 2"}, annotation.RequestHeaders, "twice")
	refused("no colon", map[string]string{annotation.RequestHeaders: "X-A"}, annotation.RequestHeaders, "expected")
	refused("empty", map[string]string{annotation.RequestHeaders: "\n"}, annotation.RequestHeaders, "no header")
	refused("bad ref", map[string]string{ch: "hdrs;evil"}, ch, "custom-headers")
	refused("other namespace", map[string]string{ch: "other/hdrs"}, ch, "other namespaces")
	refused("missing", map[string]string{ch: "hdrs"}, ch, "not found")
	refused("bad key", map[string]string{ch: "hdrs"}, ch, `ConfigMap key "X_A"`,
		headersConfigMap("ns", "hdrs", map[string]string{"X_A": "1"}))
	refused("bad value", map[string]string{ch: "hdrs"}, ch, `ConfigMap key "X-A"`,
		headersConfigMap("ns", "hdrs", map[string]string{"X-A": "a\r\nX-Evil: 1"}))
	refused("evil value", map[string]string{ch: "hdrs"}, ch, `ConfigMap key "X-A"`,
		headersConfigMap("ns", "hdrs", map[string]string{"X-A": "a\"evil'"}))
}

// NamedConfigMaps: only a valid name of the Ingress's own namespace.
func TestNamedConfigMaps(t *testing.T) {
	for v, want := range map[string][]annotation.Object{"hdrs": {{Namespace: "ns", Name: "hdrs"}}, "ns/hdrs": {{Namespace: "ns", Name: "hdrs"}}, "other/hdrs": nil, "a;b": nil} {
		ing := simpleIngress(t, "ns", "a", 0, map[string]string{annotation.NginxPrefix + "custom-headers": v}, "a.example", "/")
		if got := annotation.ConfigMaps(ing); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v", v, got)
		}
	}
}
