package gatewayapi

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

const gatewayClassDoc = `
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
`

// gatewaySnap decodes "---"-separated GatewayClass, Gateway, ListenerSet,
// route, ReferenceGrant and Namespace documents (strictly, as the files source does). Objects
// are created one minute apart in document order, so the earlier one is
// the older; namespace defaults to "default".
func gatewaySnap(t *testing.T, docs string) *source.Snapshot {
	t.Helper()
	snap := &source.Snapshot{}
	for i, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var peek struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &peek); err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		var obj metav1.Object
		switch peek.Kind {
		case "GatewayClass":
			o := &gwv1.GatewayClass{}
			snap.GatewayClasses, obj = append(snap.GatewayClasses, o), o
		case "Gateway":
			o := &gwv1.Gateway{}
			snap.Gateways, obj = append(snap.Gateways, o), o
		case "HTTPRoute":
			o := &gwv1.HTTPRoute{}
			snap.HTTPRoutes, obj = append(snap.HTTPRoutes, o), o
		case "GRPCRoute":
			o := &gwv1.GRPCRoute{}
			snap.GRPCRoutes, obj = append(snap.GRPCRoutes, o), o
		case "UDPRoute":
			o := &gwv1alpha2.UDPRoute{}
			snap.UDPRoutes, obj = append(snap.UDPRoutes, o), o
		case "TCPRoute":
			o := &gwv1alpha2.TCPRoute{}
			snap.TCPRoutes, obj = append(snap.TCPRoutes, o), o
		case "TLSRoute":
			o := &gwv1alpha2.TLSRoute{}
			snap.TLSRoutes, obj = append(snap.TLSRoutes, o), o
		case "Namespace":
			o := &corev1.Namespace{}
			snap.Namespaces, obj = append(snap.Namespaces, o), o
		case "BackendTLSPolicy":
			o := &gwv1.BackendTLSPolicy{}
			snap.BackendTLSPolicies, obj = append(snap.BackendTLSPolicies, o), o
		case "ListenerSet":
			o := &source.ListenerSet{}
			snap.ListenerSets, obj = append(snap.ListenerSets, o), o
		case "ReferenceGrant":
			o := &gwv1beta1.ReferenceGrant{}
			snap.ReferenceGrants, obj = append(snap.ReferenceGrants, o), o
		default:
			t.Fatalf("doc %d: kind %q", i, peek.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if obj.GetNamespace() == "" && peek.Kind != "GatewayClass" && peek.Kind != "Namespace" {
			obj.SetNamespace("default")
		}
		obj.SetCreationTimestamp(metav1.NewTime(epoch.Add(time.Duration(i) * time.Minute)))
	}
	return snap
}

// withServices adds Services (port 80, one endpoint each) named in ns.
func withServices(snap *source.Snapshot, ns string, names ...string) {
	for _, n := range names {
		svc, es := backend(ns, n, "", 80, 1)
		snap.Services = append(snap.Services, svc)
		snap.EndpointSlices = append(snap.EndpointSlices, es)
	}
}

func gatewayOpts() translate.Options {
	o := translate.DefaultOptions()
	o.GatewayExtendedMatches = true
	return o
}

// gwRequest is what the reference router reads.
type gwRequest struct {
	host, path, method string
	headers            map[string]string // lowercase names
	query              map[string]string
}

// gatewayRoute evaluates the listener on port as the rendered HAProxy
// config must: the first policy whose rules all match wins, else 404.
// Wildcards follow the Gateway API (one or more labels). It returns the
// pool's Service.
func gatewayRoute(t *testing.T, lb *model.LoadBalancer, port int, r gwRequest) string {
	t.Helper()
	for _, l := range lb.Listeners {
		if l.Port != port {
			continue
		}
		for _, p := range l.Policies {
			if !gatewayRulesMatch(p.Rules, r) {
				continue
			}
			if p.Action == model.ActionFixedResponse {
				return strconv.Itoa(p.StatusCode)
			}
			return lb.Pool(p.PoolID).Service
		}
		return "404"
	}
	t.Fatalf("no listener on port %d", port)
	return ""
}

func gatewayRulesMatch(rules []model.L7Rule, r gwRequest) bool {
	for _, rule := range rules {
		v := rule.Value
		var ok bool
		switch rule.Type {
		case model.RuleHostName:
			if rule.Compare == model.CompareSuffix {
				ok = strings.HasSuffix(r.host, v[1:]) && len(r.host) > len(v)-1
			} else {
				ok = r.host == v
			}
		case model.RulePath:
			ok = rulesMatch([]model.L7Rule{rule}, "", r.path)
		case model.RuleMethod:
			ok = r.method == v
		case model.RuleHeader:
			ok = r.headers[rule.Key] == v
		case model.RuleQuery:
			got, present := r.query[rule.Key]
			ok = present && got == v
		}
		if !ok {
			return false
		}
	}
	return true
}

// condition returns the condition of type typ, failing when absent.
func findCondition(t *testing.T, cs []metav1.Condition, typ string) metav1.Condition {
	t.Helper()
	for _, c := range cs {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no %s condition in %+v", typ, cs)
	return metav1.Condition{}
}

func routeRef(ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindHTTPRoute, Namespace: ns, Name: name}
}

func gatewayRef(ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindGateway, Namespace: ns, Name: name}
}
