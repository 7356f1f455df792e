package annotation

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"pier.dev/pier/internal/encode"
)

// maxAuthHeaders bounds auth-response-headers (one rule each).
const maxAuthHeaders = 16

// ExtAuth are auth-url and its companions, and pier's own
// annotations for TLS to the auth Service.
type ExtAuth struct {
	URL     *AuthURL
	Signin  string
	Headers []string
	Method  string
	// caSecret (pier.dev/auth-url-ca-secret) names the Secret of the
	// Ingress's namespace whose ca.crt signs the auth Service's
	// certificate; noVerify (pier.dev/auth-url-verify: "false") opts out
	// of checking it.
	CASecret string
	NoVerify bool
}

// AuthURL is auth-url read as a Service address:
// http(s)://<service>.<namespace>.svc[.cluster.local][:port]/path.
type AuthURL struct {
	Service, Namespace, Host, Path string
	Port                           int32
	TLS                            bool // https://
}

// parseAuthURL accepts an http or https URL to a Service by its cluster
// DNS name, with an optional port (80, or 443 for https, by default) and
// a path of letters, digits and ._~/- (default "/"); no user info, query
// or fragment, in the form Go's net/url writes it.
//
// Where the auth request goes is decided here, from the annotation
// alone, never from the request: every request of the Ingress is sent
// there with the client's headers, so a destination a client or a
// tenant could aim elsewhere (another host, an address, a name that
// resolves to the cloud's metadata service) would make pier a proxy into
// the cluster's and the node's network. Hence a Service name, and no
// nginx variables ($host would let the client pick the destination).
func parseAuthURL(v string) (*AuthURL, error) {
	bad := func(why string) (*AuthURL, error) {
		return nil, fmt.Errorf("auth-url %s: %s", QuoteForMessage(v), why)
	}
	if strings.Contains(v, "$") {
		return bad("nginx variables ($host, ...) cannot say where pier sends the auth request, or a client would choose it: " +
			"name the auth Service, http(s)://<service>.<namespace>.svc.cluster.local[:port]/path (variables are for auth-signin)")
	}
	u, err := url.Parse(v)
	if err != nil || u.String() != v || u.Opaque != "" {
		return bad("not a URL in canonical form")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("only http:// or https:// to a Service is supported")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return bad("no user info, query or fragment")
	}
	host := strings.TrimSuffix(u.Hostname(), ".cluster.local")
	labels := strings.Split(host, ".")
	if len(labels) != 3 || labels[2] != "svc" {
		return bad("the host must be <service>.<namespace>.svc or <service>.<namespace>.svc.cluster.local: " +
			"pier sends auth requests to a Service's endpoints only, never to another host or address")
	}
	if errs := validation.IsDNS1035Label(labels[0]); len(errs) > 0 {
		return bad("service: " + strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(labels[1]); len(errs) > 0 {
		return bad("namespace: " + strings.Join(errs, "; "))
	}
	a := &AuthURL{Service: labels[0], Namespace: labels[1], Host: u.Hostname(), Path: u.Path, Port: 80, TLS: u.Scheme == "https"}
	if a.TLS {
		a.Port = 443
	}
	if p := u.Port(); p != "" {
		n, err := encode.Int(p, 1, 65535)
		if err != nil || strconv.Itoa(n) != p {
			return bad("port must be 1-65535")
		}
		a.Port = int32(n)
	}
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Path, err = PlainPath("auth-url path", a.Path); err != nil {
		return nil, err
	}
	return a, nil
}

// parseSigninURL checks auth-signin as render will write it
// (encode.SigninLocation: a canonical URL whose variables are of a fixed
// set) and keeps it as written.
func parseSigninURL(v string) (string, error) {
	if _, err := encode.SigninLocation(v); err != nil {
		return "", fmt.Errorf("auth-signin: %w", err)
	}
	return v, nil
}

func parseAuthResponseHeaders(v string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(v, ",") {
		// The rule of the Gateway API header modifiers: the auth answer's
		// Content-Length, Transfer-Encoding, Connection or Host set on the
		// request would reframe or reroute it on its way to the backend.
		h, err := encode.ModifiableHeader(strings.Trim(part, " "))
		if err != nil {
			return nil, fmt.Errorf("auth-response-headers: %w", err)
		}
		for _, seen := range out {
			if strings.EqualFold(seen, h.String()) {
				return nil, fmt.Errorf("auth-response-headers: %s twice", QuoteForMessage(h.String()))
			}
		}
		out = append(out, h.String())
	}
	if len(out) > maxAuthHeaders {
		return nil, fmt.Errorf("auth-response-headers: %d headers, at most %d", len(out), maxAuthHeaders)
	}
	return out, nil
}

func parseAuthMethod(v string) (string, error) {
	m, err := encode.Enum(v, "GET", "HEAD", "POST")
	if err != nil {
		return "", fmt.Errorf("auth-method: %w", err)
	}
	return m.String(), nil
}

// extAuthIssues: the companions do nothing without auth-url (an invalid
// one refuses the Ingress already).
func extAuthIssues(e ExtAuth, ann map[string]string) []Issue {
	if e.URL != nil && !e.URL.TLS {
		for _, k := range []string{AuthURLCASecret, AuthURLVerify} {
			if _, set := ann[k]; set {
				return []Issue{{Key: k, Message: "applies to an https:// auth-url only, ignored"}}
			}
		}
	}
	if _, set := ann[KeyOf(ann, "auth-url")]; e.URL != nil || set {
		return nil
	}
	for _, k := range []string{AuthURLCASecret, AuthURLVerify} {
		if _, set := ann[k]; set {
			return []Issue{{Key: k, Message: "without auth-url does nothing"}}
		}
	}
	var out []Issue
	for _, name := range []string{"auth-signin", "auth-response-headers", "auth-method"} {
		if _, set := ann[KeyOf(ann, name)]; set {
			out = append(out, Issue{Key: KeyOf(ann, name), Message: name + " without auth-url does nothing"})
		}
	}
	return out
}

// extAuthDifference is how auth-url differs from ingress-nginx.
const extAuthDifference = "http(s):// to a Service (<service>.<namespace>.svc[.cluster.local][:port]/path) of the Ingress's namespace, " +
	"or of one listed in --auth-url-namespaces; no query or nginx variables; https checks the Service's certificate against " +
	"pier.dev/auth-url-ca-secret unless pier.dev/auth-url-verify is \"false\"; the auth request carries the client's headers, X-Original-URI, X-Original-Method " +
	"and X-Original-URL, no body; answers are not cached"

// parseSecretName accepts the name of a Secret of the Ingress's own
// namespace.
func parseSecretName(what, v string) (string, error) {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", fmt.Errorf("%s %s: a Secret name of the Ingress's namespace: %s", what, QuoteForMessage(v), strings.Join(errs, "; "))
	}
	return v, nil
}
