package source

import (
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/annotation"
)

// FrontendCAConfigMaps are the ConfigMaps a Gateway names as client
// certificate CAs (spec.tls.frontend, default and perPort), which the
// sources keep so that translation can read their ca.crt. Whether a
// ReferenceGrant permits one of another namespace is translation's
// question; a ref of another kind or with an invalid name is left out
// (translation refuses it without reading anything).
func FrontendCAConfigMaps(gw *gwv1.Gateway) []annotation.Object {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil
	}
	f := gw.Spec.TLS.Frontend
	validations := []*gwv1.FrontendTLSValidation{f.Default.Validation}
	for _, pp := range f.PerPort {
		validations = append(validations, pp.TLS.Validation)
	}
	var out []annotation.Object
	for _, v := range validations {
		if v == nil {
			continue
		}
		for _, ref := range v.CACertificateRefs {
			if ref.Group != "" || ref.Kind != "ConfigMap" {
				continue
			}
			ns := gw.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(string(ref.Name))) > 0 {
				continue
			}
			out = append(out, annotation.Object{Namespace: ns, Name: string(ref.Name)})
		}
	}
	return out
}

// BackendTLSCAConfigMaps are the ConfigMaps BackendTLSPolicies name as CA
// certificates (core ConfigMaps of the policy's namespace: a policy's
// refs are local; other kinds are refused by translation and not read),
// which the sources keep for translation, as FrontendCAConfigMaps.
func BackendTLSCAConfigMaps(policies []*gwv1.BackendTLSPolicy) []annotation.Object {
	var out []annotation.Object
	for _, p := range policies {
		for _, ref := range p.Spec.Validation.CACertificateRefs {
			if ref.Group == "" && ref.Kind == "ConfigMap" {
				out = append(out, annotation.Object{Namespace: p.Namespace, Name: string(ref.Name)})
			}
		}
	}
	return out
}
