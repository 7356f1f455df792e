package gatewayapi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/internal/translate"
)

// A Gateway's backend client certificate (spec.tls.backend
// .clientCertificateRef): a core Secret with tls.crt and tls.key, of the
// Gateway's namespace or of one whose ReferenceGrant permits Gateways of
// it. HAProxy presents it on every TLS connection the Gateway's pools
// make to members under a BackendTLSPolicy (`crt` on the server line).
// The pair is validated and its digest carried in the model, as
// ingress-nginx's proxy-ssl-secret is: the agent reads the Secret again
// and serves it only while it hashes to that (haproxydriver/upstream.go).
//
// The Gateway's ResolvedRefs condition says whether it resolved. A ref
// that does not resolve is reported (InvalidClientCertificateRef, or
// RefNotPermitted across namespaces) and the Gateway is still served: its
// pools speak TLS without a client certificate, which a backend that
// requires one refuses on its own. Nothing is presented that was not
// asked for, and no other route of the Gateway stops serving for it.

// The Gateway API v1.5+ Gateway-level reasons, which pier's v1.4.1 types
// lack.
const (
	gatewayConditionResolvedRefs          = "ResolvedRefs"
	gatewayReasonResolvedRefs             = "ResolvedRefs"
	gatewayReasonInvalidClientCertificate = "InvalidClientCertificateRef"
	gatewayReasonRefNotPermitted          = "RefNotPermitted"
	gatewayReasonListenersNotResolved     = "ListenersNotResolved"
	backendClientCertificateField         = "spec.tls.backend.clientCertificateRef"
)

// backendClient is a Gateway's backend client certificate, resolved.
type backendClient struct {
	// namespace and name are the Secret's; sha256 the digest of its
	// canonical pair. All empty when the Gateway names none, or when
	// the ref did not resolve.
	namespace, name, sha256 string
	// reason and message say why the ref did not resolve ("" when it
	// did, or when there is none).
	reason, message string
}

// resolveBackendClient resolves gw's clientCertificateRef, if any.
func resolveBackendClient(gw *gwv1.Gateway, x *index) backendClient {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Backend == nil || gw.Spec.TLS.Backend.ClientCertificateRef == nil {
		return backendClient{}
	}
	ref := gw.Spec.TLS.Backend.ClientCertificateRef
	invalid := func(format string, args ...any) backendClient {
		return backendClient{reason: gatewayReasonInvalidClientCertificate, message: backendClientCertificateField + ": " + fmt.Sprintf(format, args...)}
	}
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group != "" || kind != "Secret" {
		return invalid("kind %s of group %s: only core Secrets are supported", translate.Quote(kind), translate.Quote(group))
	}
	ns, name, bad, notPermitted := x.gatewayRef(gw, "Secret", ref.Namespace, ref.Name)
	switch {
	case bad != "":
		return invalid("%s", bad)
	case notPermitted != "":
		return backendClient{reason: gatewayReasonRefNotPermitted, message: backendClientCertificateField + ": " + notPermitted}
	}
	sec := x.Snapshot().Secret(ns, name)
	if sec == nil {
		return invalid("secret %s/%s not found (pier reads Secrets of type %s)", ns, name, corev1.SecretTypeTLS)
	}
	pair, err := tlscert.Parse(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return invalid("secret %s/%s: %v", ns, name, err)
	}
	return backendClient{namespace: ns, name: name, sha256: pair.SHA256}
}

// presentOn is pool as the Gateway's: with its client certificate when
// the pool verifies its members under a BackendTLSPolicy. Other pools,
// and every pool of a Gateway without a resolved certificate, are pool
// itself.
func (c backendClient) presentOn(pool *model.Pool) *model.Pool {
	if c.sha256 == "" || pool.UpstreamTLS == nil || !pool.UpstreamTLS.Verify || pool.UpstreamTLS.CAPEM == "" {
		return pool
	}
	p := *pool
	u := *pool.UpstreamTLS
	u.Namespace, u.Secret, u.ClientSHA256 = c.namespace, c.name, c.sha256
	p.UpstreamTLS = &u
	return &p
}

// resolvedRefsCondition is the Gateway's ResolvedRefs: false for its
// client certificate first, then for any listener whose refs did not
// resolve.
func (p *parsedGateway) resolvedRefsCondition() (ok bool, reason, message string) {
	if p.backendClient.reason != "" {
		return false, p.backendClient.reason, p.backendClient.message
	}
	for _, l := range p.ownListeners() {
		if l.unresolved != "" || l.caUnresolved != "" {
			return false, gatewayReasonListenersNotResolved, "listener " + string(l.name) + " has references that do not resolve"
		}
	}
	return true, gatewayReasonResolvedRefs, ""
}
