// Package annotation parses an Ingress's annotations, pier's own
// (pier.dev/) and the ingress-nginx ones pier implements
// (nginx.ingress.kubernetes.io/): Parse turns them into typed Settings
// and the Issues they have, reading nothing but the annotations. What
// the values name (Services, Secrets, ConfigMaps) is looked up by
// translate, which resolves Settings against the snapshot and builds the
// model from them.
//
// It also reads, from the annotations, the objects they name that pier
// watches by name: the Secrets of auth-secret, proxy-ssl-secret and
// pier.dev/auth-url-ca-secret, the ConfigMap of custom-headers. The
// sources need these before any translation (they decide what to
// watch), which is why this package sits below both the sources and
// translate.
package annotation

import (
	"errors"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Prefix is the prefix of every annotation of pier's own.
const Prefix = "pier.dev/"

// NginxPrefix is ingress-nginx's, whose annotations pier also reads.
const NginxPrefix = "nginx.ingress.kubernetes.io/"

// AuthURLCASecret names a Secret of the Ingress's namespace whose ca.crt
// signs the certificate of an https auth-url's Service.
const AuthURLCASecret = Prefix + "auth-url-ca-secret"

// KeyOf is the key an annotation of either prefix is read under: the
// pier.dev/ one when both are set, as it wins.
func KeyOf(ann map[string]string, name string) string {
	if _, ok := ann[Prefix+name]; ok {
		return Prefix + name
	}
	return NginxPrefix + name
}

// CheckObjectName checks the value of an annotation naming a Secret or
// ConfigMap: "name" or "namespace/name", each a DNS-1123 name (object
// names are subdomains). Whether the namespace is the Ingress's is
// checked once the Ingress is known (OwnNamespaceObject). The error
// says what is wrong, without the value.
func CheckObjectName(v string) error {
	ns, name, cross := strings.Cut(v, "/")
	if !cross {
		name = v
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	if cross {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return errors.New("namespace: " + strings.Join(errs, "; "))
		}
	}
	return nil
}

// OwnNamespaceObject is the object a valid CheckObjectName value v of
// ing names, as namespace and name, and whether it is in the Ingress's
// own namespace (the only ones pier reads).
func OwnNamespaceObject(ing *networkingv1.Ingress, v string) (namespace, name string, ok bool) {
	ns, name, cross := strings.Cut(v, "/")
	if !cross {
		return ing.Namespace, v, true
	}
	return ns, name, ns == ing.Namespace
}

// Object is a Secret or ConfigMap an Ingress's annotations name, which
// the sources watch by name (Secrets, ConfigMaps).
type Object struct{ Namespace, Name string }

// AuthSecret is the Secret the auth-secret annotation of ing names, as
// namespace and name, when auth-type is basic and it names one in the
// Ingress's own namespace.
func AuthSecret(ing *networkingv1.Ingress) (namespace, name string, ok bool) {
	if ing.Annotations[KeyOf(ing.Annotations, "auth-type")] != "basic" {
		return "", "", false
	}
	v, found := ing.Annotations[Prefix+"auth-secret"]
	if !found {
		v, found = ing.Annotations[NginxPrefix+"auth-secret"]
	}
	if !found || CheckObjectName(v) != nil {
		return "", "", false
	}
	return OwnNamespaceObject(ing, v)
}

// ProxySSLSecret is the Secret the proxy-ssl-secret annotation of ing
// names, when it names one in the Ingress's own namespace.
func ProxySSLSecret(ing *networkingv1.Ingress) (namespace, name string, ok bool) {
	v, found := ing.Annotations[KeyOf(ing.Annotations, "proxy-ssl-secret")]
	if !found || CheckObjectName(v) != nil {
		return "", "", false
	}
	return OwnNamespaceObject(ing, v)
}

// AuthURLCASecretOf is the Secret pier.dev/auth-url-ca-secret names, of
// the Ingress's namespace.
func AuthURLCASecretOf(ing *networkingv1.Ingress) (namespace, name string, ok bool) {
	v, found := ing.Annotations[AuthURLCASecret]
	if !found || len(validation.IsDNS1123Subdomain(v)) > 0 {
		return "", "", false
	}
	return ing.Namespace, v, true
}

// Secrets are the Secrets other than TLS ones that ing's annotations
// name and pier reads (auth-secret, proxy-ssl-secret,
// pier.dev/auth-url-ca-secret): what the sources watch and the pipeline
// rebuilds on.
func Secrets(ing *networkingv1.Ingress) []Object {
	var out []Object
	if ns, name, ok := AuthSecret(ing); ok {
		out = append(out, Object{ns, name})
	}
	if ns, name, ok := ProxySSLSecret(ing); ok {
		out = append(out, Object{ns, name})
	}
	if ns, name, ok := AuthURLCASecretOf(ing); ok {
		out = append(out, Object{ns, name})
	}
	return out
}

// ConfigMaps are the ConfigMaps ing's annotations name that pier reads
// (custom-headers of the Ingress's own namespace): what the sources
// watch and the pipeline rebuilds on.
func ConfigMaps(ing *networkingv1.Ingress) []Object {
	v, ok := ing.Annotations[KeyOf(ing.Annotations, "custom-headers")]
	if !ok || CheckObjectName(v) != nil {
		return nil
	}
	ns, name, ok := OwnNamespaceObject(ing, v)
	if !ok {
		return nil
	}
	return []Object{{Namespace: ns, Name: name}}
}
