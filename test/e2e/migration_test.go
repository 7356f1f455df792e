package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// migrationGateways are the seed examples and the ingress-nginx-style
// Ingresses below written as Gateways and HTTPRoutes the way
// ingress2gateway converts them: a Gateway of class pier per converted
// group, with one HTTP listener; a route per Ingress host; Prefix as
// PathPrefix, the defaultBackend as a rule without matches on a route
// without hostnames; a canary-by-header Ingress as a rule with an exact
// header match, canary-weight as weighted backendRefs; and, where
// ingress2gateway leaves a note instead, the Gateway API's own equivalent
// (rewrite-target's prefix strip as URLRewrite ReplacePrefixMatch,
// upstream-vhost as URLRewrite hostname, permanent-redirect as
// RequestRedirect). PORT is the listeners' port.
const migrationGateways = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: single-service, namespace: demo}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: PORT}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: single-service, namespace: demo}
spec:
  parentRefs: [{name: single-service}]
  rules: [{backendRefs: [{name: webservice-1, port: 8888}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: simple-fanout, namespace: demo}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: PORT}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: simple-fanout, namespace: demo}
spec:
  parentRefs: [{name: simple-fanout}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /dev}}]
    backendRefs: [{name: webservice-dev, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /qa}}]
    backendRefs: [{name: webservice-qa, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: virtual-hosting, namespace: demo}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: PORT}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: virtual-hosting-www-juniper-example, namespace: demo}
spec:
  parentRefs: [{name: virtual-hosting}]
  hostnames: [www.juniper.example]
  rules: [{matches: [{path: {type: PathPrefix, value: /}}], backendRefs: [{name: webservice-1, port: 8888}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: virtual-hosting-www-cisco-example, namespace: demo}
spec:
  parentRefs: [{name: virtual-hosting}]
  hostnames: [www.cisco.example]
  rules: [{matches: [{path: {type: PathPrefix, value: /}}], backendRefs: [{name: webservice-2, port: 8888}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: virtual-hosting-default-backend, namespace: demo}
spec:
  parentRefs: [{name: virtual-hosting}]
  rules: [{backendRefs: [{name: webservice-1, port: 8888}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: nginx, namespace: demo}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: PORT}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: rewrite-rewrite-example, namespace: demo}
spec:
  parentRefs: [{name: nginx}]
  hostnames: [rewrite.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /something}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: webservice-1, port: 8888}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: vhost-vhost-example, namespace: demo}
spec:
  parentRefs: [{name: nginx}]
  hostnames: [vhost.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    filters: [{type: URLRewrite, urlRewrite: {hostname: internal.example}}]
    backendRefs: [{name: webservice-2, port: 8888}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: moved-moved-example, namespace: demo}
spec:
  parentRefs: [{name: nginx}]
  hostnames: [moved.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, hostname: www.example.com, path: {type: ReplaceFullPath, replaceFullPath: /new}, statusCode: 301}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: canary-canary-example, namespace: demo}
spec:
  parentRefs: [{name: nginx}]
  hostnames: [canary.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}, headers: [{type: Exact, name: X-Canary, value: "on"}]}]
    backendRefs: [{name: webservice-2, port: 8888}]
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: webservice-1, port: 8888}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: weight-weight-example, namespace: demo}
spec:
  parentRefs: [{name: nginx}]
  hostnames: [weight.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: webservice-dev, port: 80, weight: 70}, {name: webservice-qa, port: 80, weight: 30}]
`

// migrationIngresses are the ingress-nginx-style originals of the routes
// on Gateway "nginx" above, in pier's class, annotations as users write
// them for ingress-nginx.
const migrationIngresses = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: rewrite
  namespace: demo
  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    nginx.ingress.kubernetes.io/rewrite-target: /$2
spec:
  ingressClassName: pier
  rules:
  - host: rewrite.example
    http:
      paths:
      - {path: "/something(/|$)(.*)", pathType: ImplementationSpecific, backend: {service: {name: webservice-1, port: {number: 8888}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: vhost
  namespace: demo
  annotations:
    nginx.ingress.kubernetes.io/upstream-vhost: internal.example
spec:
  ingressClassName: pier
  rules:
  - host: vhost.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: webservice-2, port: {number: 8888}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: moved
  namespace: demo
  annotations:
    nginx.ingress.kubernetes.io/permanent-redirect: https://www.example.com/new
spec:
  ingressClassName: pier
  rules:
  - host: moved.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: webservice-2, port: {number: 8888}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: canary-main, namespace: demo}
spec:
  ingressClassName: pier
  rules:
  - host: canary.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: webservice-1, port: {number: 8888}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: canary-by-header
  namespace: demo
  annotations:
    nginx.ingress.kubernetes.io/canary: "true"
    nginx.ingress.kubernetes.io/canary-by-header: X-Canary
    nginx.ingress.kubernetes.io/canary-by-header-value: "on"
spec:
  ingressClassName: pier
  rules:
  - host: canary.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: webservice-2, port: {number: 8888}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: weight-main, namespace: demo}
spec:
  ingressClassName: pier
  rules:
  - host: weight.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: webservice-dev, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: weight-canary
  namespace: demo
  annotations:
    nginx.ingress.kubernetes.io/canary: "true"
    nginx.ingress.kubernetes.io/canary-weight: "30"
spec:
  ingressClassName: pier
  rules:
  - host: weight.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: webservice-qa, port: {number: 80}}}}
`

// migrationCheck is one request sent both ways: to the original
// Ingress's address on pier's HTTP port and to its converted Gateway's.
type migrationCheck struct {
	ingress, gateway string
	host, uri        string
	header           [2]string // name, value; empty: none
}

var migrationChecks = []migrationCheck{
	{"single-service", "single-service", "anything.example", "/any/path", [2]string{}},
	{"single-service", "single-service", "", "/", [2]string{}},
	{"simple-fanout", "simple-fanout", "anything.example", "/dev", [2]string{}},
	{"simple-fanout", "simple-fanout", "anything.example", "/dev/x?y=1", [2]string{}},
	{"simple-fanout", "simple-fanout", "anything.example", "/qa/report", [2]string{}},
	{"simple-fanout", "simple-fanout", "anything.example", "/qax", [2]string{}},
	{"simple-fanout", "simple-fanout", "anything.example", "/prod", [2]string{}},
	{"virtual-hosting", "virtual-hosting", "www.juniper.example", "/", [2]string{}},
	{"virtual-hosting", "virtual-hosting", "www.cisco.example", "/a/b", [2]string{}},
	{"virtual-hosting", "virtual-hosting", "WWW.CISCO.EXAMPLE", "/", [2]string{}},
	{"virtual-hosting", "virtual-hosting", "other.example", "/", [2]string{}},
	{"rewrite", "nginx", "rewrite.example", "/something/new?x=1", [2]string{}},
	{"rewrite", "nginx", "rewrite.example", "/something", [2]string{}},
	{"rewrite", "nginx", "rewrite.example", "/something/", [2]string{}},
	{"rewrite", "nginx", "rewrite.example", "/somethingelse", [2]string{}},
	{"vhost", "nginx", "vhost.example", "/page", [2]string{}},
	{"moved", "nginx", "moved.example", "/old/page", [2]string{}},
	{"canary-main", "nginx", "canary.example", "/", [2]string{"X-Canary", "on"}},
	{"canary-main", "nginx", "canary.example", "/", [2]string{"X-Canary", "off"}},
	{"canary-main", "nginx", "canary.example", "/x", [2]string{}},
}

// migrationAnswer is what a user compares between the two paths.
type migrationAnswer struct {
	Code              int
	Service, Host     string // the echo's service and the Host it saw
	Path              string // the URI the backend saw
	Location          string
	HasServerHeader   bool
	ForwardedForCount int // X-Forwarded-For values the backend saw
}

// TestGatewayMigration: the seed examples and ingress-nginx-
// style Ingresses (rewrite-target with use-regex, upstream-vhost,
// permanent-redirect, canary by header and by weight) are served through
// `pier run`, and beside them the Gateways and HTTPRoutes that
// ingress2gateway would convert them to (migrationGateways). Every request
// gets the same answer both ways: status, backend, the Host and URI the
// backend saw, Location, and the weights split alike.
func TestGatewayMigration(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	examples(t, manifests)
	gwPort := harness.FreePort(t)
	harness.WriteFile(t, filepath.Join(manifests, "nginx-style.yaml"), migrationIngresses)
	harness.WriteFile(t, filepath.Join(manifests, "gateways.yaml"), "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\n"+
		"metadata: {name: pier}\nspec: {controllerName: pier.dev/gateway-controller}\n---\n"+
		strings.ReplaceAll(migrationGateways, "PORT", strconv.Itoa(gwPort)))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})

	gateways := map[string]string{}
	harness.WaitFor(t, 30*time.Second, "every converted Gateway serves", func() bool {
		for _, name := range []string{"single-service", "simple-fanout", "virtual-hosting", "nginx"} {
			lb := p.GatewayLB("demo", name)
			if lb == nil || lb.VIP == "" || lb.Status.State != model.StateActive {
				return false
			}
			gateways[name] = lb.VIP
		}
		return true
	})
	ingresses := map[string]string{}
	harness.WaitFor(t, 30*time.Second, "every original Ingress has its address", func() bool {
		for _, c := range append(migrationChecks, migrationCheck{ingress: "weight-main"}) {
			a := p.Addresses("demo", c.ingress)
			if len(a) == 0 {
				return false
			}
			ingresses[c.ingress] = a[0]
		}
		return true
	})

	for _, c := range migrationChecks {
		viaIngress, err := migrationGet(ingresses[c.ingress], p.HTTPPort, c)
		if err != nil {
			t.Errorf("Ingress %s: %s %s: %v", c.ingress, c.host, c.uri, err)
			continue
		}
		viaGateway, err := migrationGet(gateways[c.gateway], gwPort, c)
		if err != nil {
			t.Errorf("Gateway %s: %s %s: %v", c.gateway, c.host, c.uri, err)
			continue
		}
		if c.host == "" {
			// Go then sends the address dialled as Host, which differs.
			viaIngress.Host, viaGateway.Host = "", ""
		}
		if viaIngress != viaGateway {
			t.Errorf("Host %q %s %v:\n  Ingress %s: %+v\n  Gateway %s: %+v", c.host, c.uri, c.header,
				c.ingress, viaIngress, c.gateway, viaGateway)
		}
		if viaIngress.Code == 0 || (viaIngress.Code == 200 && viaIngress.Service == "") {
			t.Errorf("Host %q %s: no answer to compare: %+v", c.host, c.uri, viaIngress)
		}
	}

	// canary-weight 30 against backendRefs weighted 70/30: the share of
	// requests reaching the canary is the same both ways (400 requests
	// each, new connections; binomial spread about 0.023).
	share := func(addr string, port int) float64 {
		canary := 0
		const n = 400
		for range n {
			a, err := migrationGet(addr, port, migrationCheck{host: "weight.example", uri: "/"})
			if err != nil {
				t.Fatalf("weight.example via %s: %v", addr, err)
			}
			if a.Service == "webservice-qa" {
				canary++
			} else if a.Service != "webservice-dev" {
				t.Fatalf("weight.example via %s: %+v", addr, a)
			}
		}
		return float64(canary) / n
	}
	ing, gw := share(ingresses["weight-main"], p.HTTPPort), share(gateways["nginx"], gwPort)
	t.Logf("canary share: Ingress %.3f, Gateway %.3f (want 0.30)", ing, gw)
	for _, s := range []float64{ing, gw} {
		if s < 0.22 || s > 0.38 {
			t.Errorf("canary share %.3f, want 0.30 ± 0.08 (Ingress %.3f, Gateway %.3f)", s, ing, gw)
		}
	}
}

// migrationGet sends c's request to addr:port on a new connection and
// returns what is compared. Redirects are not followed.
func migrationGet(addr string, port int, c migrationCheck) (migrationAnswer, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(addr, strconv.Itoa(port))+c.uri, nil)
	if err != nil {
		return migrationAnswer{}, err
	}
	req.Host = c.host
	if c.header[0] != "" {
		req.Header.Set(c.header[0], c.header[1])
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return migrationAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return migrationAnswer{}, err
	}
	a := migrationAnswer{Code: resp.StatusCode, Location: resp.Header.Get("Location"),
		HasServerHeader: resp.Header.Get("Server") != ""}
	if resp.StatusCode == 200 {
		var r struct {
			harness.EchoReply
			Headers map[string][]string `json:"headers"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return a, fmt.Errorf("decode %q: %w", body, err)
		}
		a.Service, a.Host, a.Path = r.Service, r.Host, r.Path
		for name, values := range r.Headers {
			if strings.EqualFold(name, "X-Forwarded-For") {
				a.ForwardedForCount = len(values)
			}
		}
	}
	return a, nil
}
