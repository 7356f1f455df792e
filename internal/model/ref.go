package model

import (
	"fmt"
	"strings"
)

// ObjectRef names a source object by kind, namespace and name. Results,
// problems and status are keyed by it, so a Service, a Gateway or an
// HTTPRoute that shares an Ingress's namespace and name never collides
// with it.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Kinds of source objects pier keys results by.
const (
	KindIngress          = "Ingress"
	KindService          = "Service"
	KindGateway          = "Gateway"
	KindGatewayClass     = "GatewayClass"
	KindHTTPRoute        = "HTTPRoute"
	KindGRPCRoute        = "GRPCRoute"
	KindUDPRoute         = "UDPRoute"
	KindTCPRoute         = "TCPRoute"
	KindTLSRoute         = "TLSRoute"
	KindBackendTLSPolicy = "BackendTLSPolicy"
	KindListenerSet      = "ListenerSet"
)

// IngressRef is the ObjectRef of an Ingress.
func IngressRef(namespace, name string) ObjectRef {
	return ObjectRef{Kind: KindIngress, Namespace: namespace, Name: name}
}

// String is "Kind namespace/name" ("Kind name" when cluster-scoped).
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// MarshalText makes refs usable as JSON map keys (String's form).
func (r ObjectRef) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses String's form.
func (r *ObjectRef) UnmarshalText(b []byte) error {
	kind, rest, ok := strings.Cut(string(b), " ")
	if !ok || kind == "" || rest == "" {
		return fmt.Errorf("object ref %q: want \"Kind namespace/name\"", b)
	}
	ns, name, namespaced := strings.Cut(rest, "/")
	if !namespaced {
		ns, name = "", rest
	}
	*r = ObjectRef{Kind: kind, Namespace: ns, Name: name}
	return nil
}

// Less orders refs by kind, namespace, name, for deterministic loops.
func (r ObjectRef) Less(o ObjectRef) bool {
	if r.Kind != o.Kind {
		return r.Kind < o.Kind
	}
	if r.Namespace != o.Namespace {
		return r.Namespace < o.Namespace
	}
	return r.Name < o.Name
}

// Ref is the ObjectRef of the object a LoadBalancer serves.
func (s Source) Ref() ObjectRef {
	return ObjectRef{Kind: s.Kind, Namespace: s.Namespace, Name: s.Name}
}

// Ref is the ObjectRef of the object a Problem is about.
func (p Problem) Ref() ObjectRef {
	return ObjectRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
}
