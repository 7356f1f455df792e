package render

import (
	"encoding/base64"
	"testing"

	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
)

// TestIntegrationBasicAuth runs auth-type basic through a real HAProxy,
// with the users read from Secret data by package htpasswd as the agent
// reads them: without credentials, or with a wrong password or another
// Secret's user, the route answers 401 with WWW-Authenticate and its
// realm and the backend sees nothing; each hash format (bcrypt, SHA-512,
// SHA-256 and MD5 crypt, checked by the system's crypt(3), and Apache's
// $apr1$, checked in Lua) lets its user in, with its own password only;
// another Ingress's route of the same host and load balancer needs no
// credentials.
func TestIntegrationBasicAuth(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	private := pool("private", memberAt(startBackend(t, "private")))
	public := pool("public", memberAt(startBackend(t, "public")))
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	lb := newLB([]model.Listener{httpListener("", routes(
		with(toPool(private, hostIs("app.test"), pathPrefix("/admin")),
			model.PolicyOptions{BasicAuth: basicAuth("Staff only", "staff", htpasswd.TypeFile)}),
		with(toPool(private, hostIs("app.test"), pathPrefix("/ops")),
			model.PolicyOptions{BasicAuth: basicAuth("Ops - team", "ops", htpasswd.TypeMap)}),
		with(toPool(private, hostIs("app.test"), pathPrefix("/metrics")),
			model.PolicyOptions{BasicAuth: basicAuth("Prometheus", "apache", htpasswd.TypeFile)}),
		toPool(public, hostIs("app.test"), pathPrefix("/")),
	))}, private, public)
	addr := serveLB(t, bin, lb)
	basic := func(user, pass string) string {
		return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + "\r\n"
	}
	for _, tc := range []struct {
		name, path, auth string
		status           int
		realm, backend   string
	}{
		{"no credentials", "/admin", "", 401, `Basic realm="Staff only"`, ""},
		{"no credentials, sub-path", "/admin/users?x=1", "", 401, `Basic realm="Staff only"`, ""},
		{"wrong password", "/admin", basic("alice", "wrong"), 401, `Basic realm="Staff only"`, ""},
		{"unknown user", "/admin", basic("mallory", "s3cret"), 401, `Basic realm="Staff only"`, ""},
		{"other Secret's user", "/admin", basic("carol", "pw256"), 401, `Basic realm="Staff only"`, ""},
		{"not basic", "/admin", "Authorization: Bearer s3cret\r\n", 401, `Basic realm="Staff only"`, ""},
		{"bcrypt", "/admin", basic("alice", "s3cret"), 200, "", "private"},
		{"sha512", "/admin/x", basic("bob", "hunter2"), 200, "", "private"},
		{"ops without", "/ops", "", 401, `Basic realm="Ops - team"`, ""},
		{"ops staff user", "/ops", basic("alice", "s3cret"), 401, `Basic realm="Ops - team"`, ""},
		{"sha256, auth-map", "/ops", basic("carol", "pw256"), 200, "", "private"},
		{"bcrypt $2y$ (htpasswd -B)", "/ops", basic("dave", "s3cret"), 200, "", "private"},
		{"$2y$ wrong password", "/ops", basic("dave", "s3cret2"), 401, `Basic realm="Ops - team"`, ""},
		{"$apr1$ (htpasswd's default)", "/metrics", basic("prom", "prom-pw"), 200, "", "private"},
		{"$apr1$, a password of 41 bytes with ':' and UTF-8", "/metrics", basic("long", "a long password: over 16 bytes, with é"), 200, "", "private"},
		{"$apr1$ wrong password", "/metrics", basic("prom", "prom-pw2"), 401, `Basic realm="Prometheus"`, ""},
		{"$apr1$ empty password", "/metrics", basic("prom", ""), 401, `Basic realm="Prometheus"`, ""},
		{"$apr1$ user's password for another user", "/metrics", basic("long", "prom-pw"), 401, `Basic realm="Prometheus"`, ""},
		{"$apr1$ user elsewhere", "/admin", basic("prom", "prom-pw"), 401, `Basic realm="Staff only"`, ""},
		{"MD5-crypt $1$ beside $apr1$", "/metrics", basic("erin", "erin-pw"), 200, "", "private"},
		{"bcrypt beside $apr1$", "/metrics", basic("alice", "s3cret"), 200, "", "private"},
		{"bcrypt beside $apr1$, wrong", "/metrics", basic("alice", "prom-pw"), 401, `Basic realm="Prometheus"`, ""},
		{"no credentials beside $apr1$", "/metrics", "", 401, `Basic realm="Prometheus"`, ""},
		{"other route, no credentials", "/", "", 200, "", "public"},
		{"other route, /administrator", "/administrator", "", 200, "", "public"},
	} {
		resp := rawRequest(t, addr, "127.0.0.1", "GET "+tc.path+" HTTP/1.1\r\nHost: app.test\r\n"+tc.auth+"\r\n")
		if resp.StatusCode != tc.status || resp.Header.Get("WWW-Authenticate") != tc.realm || resp.Header.Get("X-Backend") != tc.backend {
			t.Errorf("%s: %d WWW-Authenticate %q backend %q, want %d %q %q", tc.name, resp.StatusCode,
				resp.Header.Get("WWW-Authenticate"), resp.Header.Get("X-Backend"), tc.status, tc.realm, tc.backend)
		}
	}
}
