package gatewayapi

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/internal/translate"
)

// Client certificate validation (a Gateway's spec.tls.frontend): the
// CAs of the HTTPS listeners of a port are the perPort entry of that
// port, else the default. They are ConfigMaps with a ca.crt, of the
// Gateway's namespace or of one whose ReferenceGrant permits it. A ref
// that fails makes ResolvedRefs False on every HTTPS listener of the
// port (with the reason the spec names); when all of them fail, the
// listeners are not accepted (NoValidCACertificate) and not served, so
// no client reaches them unchecked. With some valid, the listeners are
// served with those: a client of a CA that failed is refused, never let
// in.

// The Gateway API v1.5+ reasons, which pier's v1.4.1 types lack.
const (
	reasonNoValidCACertificate     gwv1.ListenerConditionReason = "NoValidCACertificate"
	reasonInvalidCACertificateRef  gwv1.ListenerConditionReason = "InvalidCACertificateRef"
	reasonInvalidCACertificateKind gwv1.ListenerConditionReason = "InvalidCACertificateKind"
)

// maxCARefs bounds caCertificateRefs as the API server does (v1.7.0's
// CRD); a manifest file may hold more.
const maxCARefs = 16

// frontendValidation is the validation that applies to the HTTPS
// listeners on port, and the field it comes from; nil when none does.
func frontendValidation(gw *gwv1.Gateway, port int) (*gwv1.FrontendTLSValidation, string) {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil, ""
	}
	f := gw.Spec.TLS.Frontend
	for i, pp := range f.PerPort {
		if int(pp.Port) == port {
			return pp.TLS.Validation, fmt.Sprintf("spec.tls.frontend.perPort[%d].tls.validation", i)
		}
	}
	return f.Default.Validation, "spec.tls.frontend.default.validation"
}

// applyFrontendValidation sets an HTTPS listener's client validation and
// the conditions its CA refs call for.
func applyFrontendValidation(gw *gwv1.Gateway, l *gwListener, x *index) {
	v, field := frontendValidation(gw, l.port)
	if v == nil {
		return
	}
	cv, reason, message := clientValidation(gw, v, field, x)
	if reason != "" {
		l.caUnresolved = string(reason)
		l.message = joinMessages(l.message, message)
	}
	if cv == nil {
		l.notAccepted = string(reasonNoValidCACertificate)
		if reason == reasonUnsupportedValue {
			l.notAccepted, l.caUnresolved = string(reason), ""
		}
		return
	}
	l.clientValidation = cv
}

func joinMessages(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// clientValidation resolves v's refs. It returns the validation of the
// refs that resolve (nil when none does) and, when one does not, the
// ResolvedRefs reason and a message naming each that failed.
func clientValidation(gw *gwv1.Gateway, v *gwv1.FrontendTLSValidation, field string, x *index) (*model.ClientValidation, gwv1.ListenerConditionReason, string) {
	optional := false
	switch v.Mode {
	case "", gwv1.AllowValidOnly:
	case gwv1.AllowInsecureFallback:
		optional = true
	default:
		// The API server's enum refuses this; a manifest file may not.
		return nil, reasonUnsupportedValue, fmt.Sprintf("%s.mode %s is not AllowValidOnly or AllowInsecureFallback", field, translate.Quote(string(v.Mode)))
	}
	if len(v.CACertificateRefs) == 0 || len(v.CACertificateRefs) > maxCARefs {
		return nil, reasonInvalidCACertificateRef, fmt.Sprintf("%s.caCertificateRefs: %d refs, from 1 to %d are taken", field, len(v.CACertificateRefs), maxCARefs)
	}
	var reason gwv1.ListenerConditionReason
	var message string
	var refs []model.ConfigMapRef
	var parts [][]byte
	for i, ref := range v.CACertificateRefs {
		ns, name, pem, why, msg := caRef(gw, ref, x)
		if why != "" {
			if reason == "" {
				reason = why
			}
			message = joinMessages(message, fmt.Sprintf("%s.caCertificateRefs[%d]: %s", field, i, msg))
			continue
		}
		refs = append(refs, model.ConfigMapRef{Namespace: ns, Name: name})
		parts = append(parts, pem)
	}
	if len(refs) == 0 {
		return nil, reason, message
	}
	bundle, err := tlscert.JoinCA(parts...)
	if err != nil {
		// Each part parsed alone: only the total can be too large.
		return nil, reasonInvalidCACertificateRef, joinMessages(message, fmt.Sprintf("%s.caCertificateRefs: %v", field, err))
	}
	return &model.ClientValidation{CAs: refs, SHA256: bundle.SHA256, Optional: optional}, reason, message
}

// caRef resolves one ref to a ConfigMap's canonical ca.crt, or says why
// it does not resolve.
func caRef(gw *gwv1.Gateway, ref gwv1.ObjectReference, x *index) (ns, name string, pem []byte, reason gwv1.ListenerConditionReason, message string) {
	if ref.Group != "" || ref.Kind != "ConfigMap" {
		return "", "", nil, reasonInvalidCACertificateKind, fmt.Sprintf("kind %s of group %s: only core ConfigMaps are supported",
			translate.Quote(string(ref.Kind)), translate.Quote(string(ref.Group)))
	}
	ns, name, invalid, notPermitted := x.gatewayRef(gw, "ConfigMap", ref.Namespace, ref.Name)
	switch {
	case invalid != "":
		return "", "", nil, reasonInvalidCACertificateRef, invalid
	case notPermitted != "":
		return "", "", nil, gwv1.ListenerReasonRefNotPermitted, notPermitted
	}
	cm := x.Snapshot().ConfigMap(ns, name)
	if cm == nil {
		return "", "", nil, reasonInvalidCACertificateRef, fmt.Sprintf("config map %s/%s not found", ns, name)
	}
	data, ok := cm.Data["ca.crt"]
	if !ok {
		return "", "", nil, reasonInvalidCACertificateRef, fmt.Sprintf("config map %s/%s has no ca.crt", ns, name)
	}
	bundle, err := tlscert.ParseCA([]byte(data))
	if err != nil {
		return "", "", nil, reasonInvalidCACertificateRef, fmt.Sprintf("config map %s/%s: ca.crt: %v", ns, name, err)
	}
	return ns, name, bundle.PEM, "", ""
}

// insecureFrontend reports whether some validation of gw accepts clients
// without a valid certificate (the Gateway's InsecureFrontendValidationMode
// condition).
func insecureFrontend(gw *gwv1.Gateway) bool {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return false
	}
	f := gw.Spec.TLS.Frontend
	if v := f.Default.Validation; v != nil && v.Mode == gwv1.AllowInsecureFallback {
		return true
	}
	for _, pp := range f.PerPort {
		if v := pp.TLS.Validation; v != nil && v.Mode == gwv1.AllowInsecureFallback {
			return true
		}
	}
	return false
}
