package e2e

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// snippetManifests: an Ingress whose snippet denies one path, as many
// ingress-nginx Ingresses do.
const snippetManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/server-snippet: |
      location = /ping {
        deny all;
      }
spec:
  ingressClassName: pier
  rules:
    - host: app.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
` + shopEcho

// TestIgnoreSnippets: with --ignore-snippets pier run serves an Ingress
// with a snippet, without it (/ping answers: what the snippet denied is
// open) and with a Warning that says so; without the flag the Ingress is
// refused (test/e2e/annotations_test.go).
func TestIgnoreSnippets(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.StartEcho(t, "echo", "echo-pod")
	harness.WriteFile(t, filepath.Join(manifests, "shop.yaml"), strings.ReplaceAll(snippetManifests, "ECHOPORT", strconv.Itoa(port)))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state, ExtraArgs: []string{"--ignore-snippets"}})
	vip := p.Addresses("shop", "app")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	if code, reply, _, err := harness.Get(client, vip, p.HTTPPort, "app.example", "/ping"); err != nil || code != 200 || reply.Service != "echo" {
		t.Errorf("/ping: %d %+v %v, want the backend's answer (the snippet is ignored)", code, reply, err)
	}
	ing, err := p.Ingress("shop", "app")
	if err != nil || len(ing.Problems) != 1 || ing.Problems[0].Reason != "IgnoredAnnotation" ||
		!strings.Contains(ing.Problems[0].Message, "ignored (--ignore-snippets)") || !strings.Contains(ing.Problems[0].Message, "for deny use") {
		t.Errorf("want one IgnoredAnnotation warning naming the flag and the alternative, got %+v %v", ing, err)
	}
}
