package gatewayapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// grantIndex holds the ReferenceGrants by the namespace they live in: a
// grant is written by the owner of the namespace referred to, never by
// the one referring (the Gateway API's rule: the target consents).
type grantIndex map[string][]*gwv1beta1.ReferenceGrant

func newGrantIndex(in []*gwv1beta1.ReferenceGrant) grantIndex {
	g := grantIndex{}
	for _, rg := range in {
		g[rg.Namespace] = append(g[rg.Namespace], rg)
	}
	return g
}

// permits reports whether an object of kind fromKind (a Gateway API kind)
// in fromNS may refer to the core object toKind toNS/toName. A reference
// within one namespace needs no grant. One grant must list both the
// referring side (group, kind, namespace) and the target (core group,
// kind, and either no name or this name).
func (g grantIndex) permits(fromKind, fromNS, toKind, toNS, toName string) bool {
	if fromNS == toNS {
		return true
	}
	for _, rg := range g[toNS] {
		if grantFrom(rg.Spec.From, fromKind, fromNS) && grantTo(rg.Spec.To, toKind, toName) {
			return true
		}
	}
	return false
}

func grantFrom(from []gwv1beta1.ReferenceGrantFrom, kind, ns string) bool {
	for _, f := range from {
		if string(f.Group) == gwv1.GroupName && string(f.Kind) == kind && string(f.Namespace) == ns {
			return true
		}
	}
	return false
}

func grantTo(to []gwv1beta1.ReferenceGrantTo, kind, name string) bool {
	for _, t := range to {
		if string(t.Group) != "" || string(t.Kind) != kind {
			continue
		}
		if t.Name == nil || *t.Name == "" || string(*t.Name) == name {
			return true
		}
	}
	return false
}

// index is translation's look-ups with the snapshot's ReferenceGrants,
// which only the Gateway API reads.
type index struct {
	*translate.Index
	grants grantIndex
	tls    *backendTLS
}

func newIndex(snap *source.Snapshot) *index {
	return &index{Index: translate.NewIndex(snap), grants: newGrantIndex(snap.ReferenceGrants), tls: newBackendTLS(snap)}
}

// gatewayRef is the object a Gateway's reference to a Secret or a
// ConfigMap (kind) names: its namespace, the Gateway's when the ref names
// none, and its name. invalid says what is wrong with their syntax, and
// notPermitted that no ReferenceGrant lets the Gateway read across
// namespaces; both are "" when the object may be read. The listeners'
// certificates, their client CAs and the backend client certificate all
// resolve their refs here; each caller gives the reasons its condition
// takes.
func (x *index) gatewayRef(gw *gwv1.Gateway, kind string, refNS *gwv1.Namespace, refName gwv1.ObjectName) (ns, name, invalid, notPermitted string) {
	return x.referrerRef(referrer{kind: model.KindGateway, namespace: gw.Namespace}, kind, refNS, refName)
}

// referrer is the object whose listener refers to a Secret: a Gateway,
// or a ListenerSet, whose own namespace and kind a ReferenceGrant must
// name.
type referrer struct {
	kind, namespace string
}

// referrerRef is gatewayRef for the listeners of any referrer.
func (x *index) referrerRef(from referrer, kind string, refNS *gwv1.Namespace, refName gwv1.ObjectName) (ns, name, invalid, notPermitted string) {
	ns, name = from.namespace, string(refName)
	if refNS != nil {
		ns = string(*refNS)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return ns, name, "invalid namespace " + translate.Quote(ns), ""
		}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return ns, name, "invalid name " + translate.Quote(name), ""
	}
	if !x.grants.permits(from.kind, from.namespace, kind, ns, name) {
		noun := map[string]string{"Secret": "secret", "ConfigMap": "config map"}[kind]
		return ns, name, "", fmt.Sprintf("%s %s/%s is in another namespace and no ReferenceGrant there permits %ss of %s", noun, ns, name, from.kind, from.namespace)
	}
	return ns, name, "", ""
}
