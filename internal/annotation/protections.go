package annotation

import "strings"

// Some ingress-nginx annotations protect what an Ingress serves rather
// than shape it: client certificates (auth-tls-secret, with
// auth-tls-verify-client on by default) and ModSecurity
// (enable-modsecurity, enable-owasp-core-rules). pier implements
// neither, and serving such an Ingress without them lets in every
// client, or every request, its author meant to keep out. So, as with
// snippets, the Ingress is refused with what to do instead, unless the
// operator says to serve it without the protection
// (Policy.IgnoreProtections, --ignore-protection-annotations).

// protectionAlternatives is, per protecting annotation, what it would
// have done and what to use instead.
var protectionAlternatives = map[string]string{
	"auth-tls-secret": "pier does not check client certificates, so every client would get in: " +
		"pass TLS through to the backend (ssl-passthrough) and check them there, or keep the Ingress on ingress-nginx",
	"enable-modsecurity": "pier has no ModSecurity, so the requests it would block would reach the backend: " +
		"put a WAF in front of pier, or keep the Ingress on ingress-nginx",
	"enable-owasp-core-rules": "pier has no ModSecurity or OWASP core rule set, so the requests they would block would reach the backend: " +
		"put a WAF in front of pier, or keep the Ingress on ingress-nginx",
}

// asksProtection reports whether the ingress-nginx annotation name with
// value v, among ann, asks for a protection pier lacks. A client
// certificate is checked when auth-tls-secret names a Secret and
// auth-tls-verify-client is not "off" (ingress-nginx's default is on);
// the other auth-tls-* annotations only tune that check.
func asksProtection(name, v string, ann map[string]string) bool {
	switch name {
	case "auth-tls-secret":
		verify := strings.ToLower(strings.TrimSpace(ann[NginxPrefix+"auth-tls-verify-client"]))
		return strings.TrimSpace(v) != "" && verify != "off"
	case "enable-modsecurity", "enable-owasp-core-rules":
		return strings.EqualFold(strings.TrimSpace(v), "true")
	}
	return false
}

// protectionIgnored is the Warning for a protection served without.
func protectionIgnored(name string) string {
	return "not supported, ignored (--ignore-protection-annotations): " + protectionAlternatives[name]
}

// protectionRefused is the refusal for a protection pier lacks.
func protectionRefused(name string) string {
	return protectionAlternatives[name] +
		"; --ignore-protection-annotations serves the Ingress without it"
}
