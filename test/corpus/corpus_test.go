// Package corpus runs a corpus of Ingress manifests in the shapes public
// charts and guides give them (testdata/, one application per file)
// through `pier lint` and through one `pier run` of them all, and checks
// that lint's verdict on each Ingress is what run does: a served one
// answers through its address with its backend's answer, a refused one
// gets no address and the same problems, one of another class is left
// alone, a document lint cannot read run cannot either.
package corpus

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/lint"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// expectation is what the corpus's author expects of one Ingress: lint's
// verdict, and the requests that show run serves it.
type expectation struct {
	verdict lint.Verdict
	probes  []probe
}

const (
	serves   = lint.Serves
	differs  = lint.ServesWithDifferences
	refused  = lint.Refused
	notOurs  = lint.NotOurs
	redirect = 308 // ssl-redirect and force-ssl-redirect, as ingress-nginx
)

// corpus is every Ingress of testdata/, by namespace/name.
var corpus = map[string]expectation{
	"affinity/sessions": {differs, []probe{{host: "sessions.example.com", path: "/", service: "one", respHeader: [2]string{"Set-Cookie", "route="}}}},
	"allowlist/admin":   {serves, []probe{{host: "admin.example.com", path: "/", service: "one"}}},
	"approot/dashboard": {differs, []probe{
		{host: "approot.example.com", path: "/", status: 302, location: "/dashboard"},
		{host: "approot.example.com", path: "/dashboard", service: "one"},
		{host: "www.approot.example.com", path: "/x", status: 308, location: "http://approot.example.com/x"}}},
	"argocd/argocd-server-ingress": {differs, []probe{
		{https: true, host: "argocd.example.com", path: "/applications", service: "tls", backendPath: "/applications"},
		{host: "argocd.example.com", path: "/", status: redirect, location: "https://argocd.example.com/"}}},
	"argocd-grpc/argocd-server-grpc-ingress": {differs, []probe{{https: true, host: "argocd-grpc.example.com", path: "/version.VersionService/Version", service: "h2c"}}},
	"argocd-grpc/argocd-server-http-ingress": {differs, []probe{
		{https: true, host: "argocd-ui.example.com", path: "/", service: "one"},
		{host: "argocd-ui.example.com", path: "/", status: redirect, location: "https://argocd-ui.example.com/"}}},
	"canary/web":          {serves, []probe{{host: "canary.example.com", path: "/", header: map[string]string{"X-Canary": "never"}, service: "one"}}},
	"canary/web-canary":   {differs, []probe{{host: "canary.example.com", path: "/", header: map[string]string{"X-Canary": "always"}, service: "two"}}},
	"certs/www":           {differs, []probe{{host: "www.example.com", path: "/", service: "one"}, {https: true, host: "www.example.com", path: "/", service: "one"}}},
	"chat/chat":           {differs, []probe{{host: "chat.example.com", path: "/ws/room", service: "one"}}},
	"cors/api":            {differs, []probe{{host: "cors-api.example.com", path: "/", header: map[string]string{"Origin": "https://app.example.com"}, service: "one", respHeader: [2]string{"Access-Control-Allow-Origin", "https://app.example.com"}}}},
	"cors-wildcard/api":   {refused, nil},
	"custom-headers/docs": {differs, []probe{{host: "docs.example.com", path: "/", service: "one", respHeader: [2]string{"X-Served-By", "pier-corpus"}}}},
	"dashboard/dashboard": {refused, nil},
	"errors/store":        {differs, []probe{{host: "errors.example.com", path: "/", service: "one"}}},
	"fallback/catch-all":  {serves, []probe{{host: "anything.example", path: "/any", service: "three"}}},
	"grafana/grafana":     {differs, []probe{{host: "ops.example.com", path: "/grafana/login", service: "two", backendPath: "/login"}}},
	"harbor/harbor-ingress": {differs, []probe{
		{https: true, host: "harbor.example.com", path: "/api/v2.0/ping", service: "one"},
		{https: true, host: "harbor.example.com", path: "/v2/library/nginx/manifests/latest", service: "one"},
		{https: true, host: "harbor.example.com", path: "/c/login", service: "one"},
		{https: true, host: "harbor.example.com", path: "/harbor/projects", service: "two"},
		{host: "harbor.example.com", path: "/", status: redirect, location: "https://harbor.example.com/"}}},
	"headers/site":       {refused, nil},
	"headers-typed/site": {serves, []probe{{host: "headers-typed.example.com", path: "/", service: "one", respHeader: [2]string{"X-Frame-Options", "DENY"}}}},
	"keycloak/keycloak":  {differs, []probe{{https: true, host: "keycloak.example.com", path: "/auth/realms/master", service: "tls", backendPath: "/realms/master"}}},
	"monitoring/prometheus": {differs, []probe{
		{host: "prometheus.example.com", path: "/", basic: [2]string{"admin", "prom-pass"}, service: "one"},
		{host: "prometheus.example.com", path: "/", basic: [2]string{"admin", "wrong"}, status: 401},
		{host: "prometheus.example.com", path: "/", status: 401}}},
	"monitoring-am/alertmanager": {differs, []probe{
		{host: "alertmanager.example.com", path: "/", basic: [2]string{"admin", "alert-pass"}, service: "two"},
		{host: "alertmanager.example.com", path: "/", status: 401}}},
	// pier checks no client certificates: served without the check, any
	// client would get in, so it is refused (ProtectionRefused).
	"mtls/partner-api":    {refused, nil},
	"nextcloud/nextcloud": {refused, nil},
	"nextcloud-typed/nextcloud": {differs, []probe{{host: "cloud.example.com", path: "/index.php",
		header: map[string]string{"X-Echo-Set-Header": "X-Powered-By: PHP"}, service: "one", respHeader: [2]string{"X-Powered-By", ""}}}},
	"nextcloud-typed/nextcloud-carddav": {serves, []probe{{host: "cloud.example.com", path: "/.well-known/carddav", status: 301, location: "https://cloud.example.com/remote.php/dav"}}},
	"nextcloud-typed/nextcloud-denied":  {serves, []probe{{host: "cloud.example.com", path: "/data/admin/files", status: 403}}},
	"notes/notes":                       {differs, []probe{{host: "notes.example.com", path: "/", service: "one"}}},
	"oauth2-proxy/oauth2-proxy":         {serves, []probe{{host: "auth.example.com", path: "/oauth2/start", service: "three"}}},
	"pending-tls/pending":               {differs, []probe{{host: "pending.example.com", path: "/", service: "one"}}},
	"ping/app":                          {refused, nil},
	"ping-typed/app":                    {serves, []probe{{host: "ping-typed.example.com", path: "/", service: "one"}}},
	"ping-typed/app-ping":               {serves, []probe{{host: "ping-typed.example.com", path: "/ping", status: 403}}},
	"previews/previews":                 {serves, []probe{{host: "pr-7.preview.example.com", path: "/", service: "one"}}},
	"priority/test-ingress-1": {differs, []probe{
		{host: "test.example.com", path: "/foo/bar", service: "one"},
		// /foo/bar/ is the same Prefix as /foo/bar: the first one serves
		// both, and a DuplicatePath warning says so (ingress-nginx
		// matches the longer location).
		{host: "test.example.com", path: "/foo/bar/", service: "one"}}},
	"priority/test-ingress-2": {differs, []probe{{host: "test.example.com", path: "/foo/bar/x", service: "three", backendPath: "/x"}}},
	"priority/test-ingress-3": {differs, []probe{{host: "test.example.com", path: "/foo/bar/bar", service: "three"}}},
	// On its own address the catch-all also answers /foo/bar/, which
	// ingress-nginx would send to service2: the host split lint reports.
	"priority/test-ingress-4": {differs, []probe{{host: "test.example.com", path: "/foo/bar/", service: "one"}}},
	"mesh/mesh":               {differs, []probe{{host: "mesh.example.com", path: "/", status: 503}}},
	"ratelimit/public-api":    {differs, []probe{{host: "ratelimit.example.com", path: "/", service: "one"}}},
	"redirects/old-blog":      {serves, []probe{{host: "oldblog.example.com", path: "/2019/post", status: 308, location: "https://blog.example.com/"}}},
	"reports/reports":         {differs, []probe{{host: "reports.example.com", path: "/", status: 503}}},
	"sentry/sentry": {differs, []probe{
		{host: "sentry.example.com", path: "/api/1/envelope/", service: "two"},
		{host: "sentry.example.com", path: "/api/store/", service: "two"},
		{host: "sentry.example.com", path: "/api/0/projects/", service: "one"},
		{host: "sentry.example.com", path: "/organizations/", service: "one"}}},
	"shop/checkout":    {differs, []probe{{host: "shop.example.com", path: "/checkout/cart", service: "two"}}},
	"shop/storefront":  {serves, []probe{{host: "shop.example.com", path: "/", service: "one"}}},
	"traefik/whoami":   {notOurs, nil},
	"vhost/legacy-app": {differs, []probe{{host: "vhost.example.com", path: "/", service: "one", backendHost: "legacy.internal.example"}}},
	"wiki/wiki":        {refused, nil},
}

// notRead is the documents lint and run cannot read, by the Ingress they
// hold, with the message both give.
var notRead = map[string]string{
	"legacy/legacy-api": "Ingress legacy/legacy-api: extensions/v1beta1 is not supported, use networking.k8s.io/v1",
}

// lintOutput is pier lint -o json.
type lintOutput struct {
	lint.Report
	NotRead []string `json:"notRead"`
}

func TestCorpusLintMatchesRun(t *testing.T) {
	bin := harness.PierBin(t)
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatalf("the corpus needs HAProxy (hack/deps.sh installs it): %v", err)
	}
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	copyCorpus(t, manifests, startBackends(t))

	out := runLint(t, bin, manifests)
	if !out.Checked {
		t.Errorf("lint did not run haproxy -c: %s", out.HAProxy)
	}
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	seen := map[string]bool{}
	for _, ing := range out.Ingresses {
		key := ing.Namespace + "/" + ing.Name
		seen[key] = true
		want, ok := corpus[key]
		if !ok {
			t.Errorf("%s: not in the test's table (lint: %s %s)", key, ing.Verdict, ing.Reason)
			continue
		}
		if ing.Verdict != want.verdict {
			t.Errorf("%s: lint says %q (%s), the corpus expects %q", key, ing.Verdict, ing.Reason, want.verdict)
		}
		checkRun(t, p, ing, want)
	}
	for key := range corpus {
		if !seen[key] {
			t.Errorf("%s: in the table, not in lint's report", key)
		}
	}
	checkNotRead(t, p, out.NotRead)
	s := out.Summary
	t.Logf("corpus: %d Ingresses: %d serve, %d serve with differences, %d refused, %d not pier's; %d documents not read",
		s.Ingresses, s.Serves, s.ServesWithDifferences, s.Refused, s.NotOurs, len(out.NotRead))
}

// runLint runs pier lint on dir as a user does and decodes its report;
// it exits 1 since the corpus holds refused Ingresses.
func runLint(t *testing.T, bin, dir string) lintOutput {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "lint", "-f", dir, "-o", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("pier lint: %v, want exit 1; stderr %s", err, stderr.String())
	}
	var out lintOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("pier lint -o json: %v\n%s", err, stdout.String())
	}
	return out
}

// checkRun checks that run does with ing what lint says.
func checkRun(t *testing.T, p *harness.Pier, ing lint.Ingress, want expectation) {
	t.Helper()
	key := ing.Namespace + "/" + ing.Name
	switch ing.Verdict {
	case lint.Serves, lint.ServesWithDifferences:
		if len(want.probes) == 0 {
			t.Errorf("%s: served, but the table has no request to show it", key)
		}
		vip := p.Addresses(ing.Namespace, ing.Name)[0]
		for _, pr := range want.probes {
			if bad := pr.send(vip, p.HTTPPort, p.HTTPSPort); bad != "" {
				t.Errorf("%s: lint says %q; %s via %s: %s", key, ing.Verdict, pr, vip, bad)
			}
		}
		checkSameProblems(t, p, ing)
	case lint.Refused:
		got := awaitIngress(t, p, ing.Namespace, ing.Name)
		if len(got.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("%s: lint says refused (%s); run published %v", key, ing.Reason, got.Status.LoadBalancer.Ingress)
		}
		checkSameProblems(t, p, ing)
	case lint.NotOurs:
		if got, err := p.Ingress(ing.Namespace, ing.Name); err == nil && len(got.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("%s: lint says not pier's; run published %v", key, got.Status.LoadBalancer.Ingress)
		}
	}
}

// awaitIngress waits until run knows ns/name: the first snapshot is
// translated.
func awaitIngress(t *testing.T, p *harness.Pier, ns, name string) *api.IngressResponse {
	t.Helper()
	var got *api.IngressResponse
	harness.WaitFor(t, 20*time.Second, "run's verdict on "+ns+"/"+name, func() bool {
		r, err := p.Ingress(ns, name)
		if err == nil && r.Ingress != nil {
			got = r
		}
		return got != nil
	})
	return got
}

// checkSameProblems: run reports for ing exactly the problems lint does.
func checkSameProblems(t *testing.T, p *harness.Pier, ing lint.Ingress) {
	t.Helper()
	got := awaitIngress(t, p, ing.Namespace, ing.Name)
	if a, b := problemSet(ing.Problems), problemSet(got.Problems); a != b {
		t.Errorf("%s/%s: lint's problems\n%s\nrun's\n%s", ing.Namespace, ing.Name, a, b)
	}
}

func problemSet(ps []model.Problem) string {
	lines := make([]string, 0, len(ps))
	for _, p := range ps {
		lines = append(lines, string(p.Severity)+" "+p.Reason+" "+p.Field+": "+p.Message)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// checkNotRead: each document lint could not read, run could not either:
// the Ingress is unknown to its API and its log names the same problem.
func checkNotRead(t *testing.T, p *harness.Pier, problems []string) {
	t.Helper()
	if len(problems) != len(notRead) {
		t.Errorf("lint could not read %d documents (%q), the corpus has %d", len(problems), problems, len(notRead))
	}
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for key, msg := range notRead {
		if !containsAny(problems, msg) {
			t.Errorf("%s: lint's documents not read %q lack %q", key, problems, msg)
		}
		ns, name, _ := strings.Cut(key, "/")
		if _, err := p.Ingress(ns, name); err == nil {
			t.Errorf("%s: lint could not read it, run serves it", key)
		}
		if !bytes.Contains(log, []byte(msg)) || !bytes.Contains(log, []byte("manifest document skipped")) {
			t.Errorf("%s: run's log does not say %q", key, msg)
		}
	}
}

func containsAny(list []string, s string) bool {
	for _, l := range list {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
