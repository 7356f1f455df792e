package render

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// clientValidationFixture: a Gateway's spec.tls.frontend, a port that
// requires a client certificate (443) and one with the insecure fallback
// (8443), both with the same server certificate.
func clientValidationFixture(a, b model.Pool) *model.LoadBalancer {
	cert := model.Certificate{ID: model.ID("cert", "gw-tls"), Namespace: "ns", Secret: "gw-tls", Hosts: []string{"*.foo.com", "foo.bar.com"}, SHA256: "aa"}
	listener := func(port int, optional bool, sha string) model.Listener {
		return model.Listener{Name: "https-" + string(rune('0'+port%10)), Protocol: model.ProtocolTerminatedHTTPS, Port: port,
			Certificates:     []model.Certificate{cert},
			ClientValidation: &model.ClientValidation{CAs: []model.ConfigMapRef{{Namespace: "ns", Name: "ca"}}, SHA256: sha, Optional: optional},
			Policies:         routes(toPool(a, hostIs("foo.bar.com"), pathPrefix("/")), toPool(b, hostWild("*.foo.com"), pathPrefix("/")))}
	}
	return newLB([]model.Listener{listener(443, false, "c1"), listener(8443, true, "c2")}, a, b)
}

// writeClientCAs writes a throwaway CA at each client validation's path,
// for haproxy -c.
func writeClientCAs(t *testing.T, dir string, lb *model.LoadBalancer) {
	t.Helper()
	for _, l := range lb.Listeners {
		if cv := l.ClientValidation; cv != nil {
			path, err := lbAt(dir).ClientCA(cv.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			ca, _ := splitPEM(selfSigned(t, []string{"ca.example"}))
			writeFile(t, path, ca)
		}
	}
}

// Client validation is refused where nothing terminates TLS, and a
// bundle digest that is not hex never becomes a path.
func TestClientValidationRefused(t *testing.T) {
	a := pool("a", member("10.0.0.1", 80))
	cv := &model.ClientValidation{CAs: []model.ConfigMapRef{{Namespace: "ns", Name: "ca"}}, SHA256: "c1"}
	plain := newLB([]model.Listener{httpListener(a.ID, nil)}, a)
	plain.Listeners[0].ClientValidation = cv
	noCA := clientValidationFixture(a, pool("b", member("10.0.0.2", 80)))
	noCA.Listeners[0].ClientValidation = &model.ClientValidation{SHA256: "c1"}
	badDigest := clientValidationFixture(a, pool("b", member("10.0.0.2", 80)))
	badDigest.Listeners[0].ClientValidation.SHA256 = "../../etc/passwd"
	for _, tc := range []struct {
		name string
		lb   *model.LoadBalancer
		want string
	}{
		{"on HTTP", plain, "terminates no TLS"},
		{"without CA", noCA, "names no CA"},
		{"digest not hex", badDigest, "not lowercase hex"},
	} {
		_, err := Render(tc.lb, lbAt(fixtureDir), nil, fixtureOptions())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
