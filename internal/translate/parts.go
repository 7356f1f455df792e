package translate

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// The parts of Ingress translation that the Gateway API translation
// (internal/gatewayapi) builds on, so that a Gateway's pools, members,
// certificates, checks and quotas are made exactly as an Ingress's are.
// That package imports this one, never the other way round; each name
// here is a thin door onto the function Ingress translation uses.

// MaxTries bounds the tries of one request (the first and its retries),
// as for pier.dev/retries.
const MaxTries = annotation.MaxTries

// MaxCookieAge bounds a session cookie's max-age: ten years.
const MaxCookieAge = annotation.MaxCookieAge

// Index answers the snapshot look-ups translation makes (Services by
// name, their EndpointSlices), each a map access.
type Index struct{ x *index }

// NewIndex indexes snap.
func NewIndex(snap *source.Snapshot) *Index { return &Index{x: newIndex(snap)} }

// Snapshot is the indexed snapshot.
func (i *Index) Snapshot() *source.Snapshot { return i.x.snap }

// Service is the Service ns/name, or nil.
func (i *Index) Service(ns, name string) *corev1.Service { return i.x.services[ns+"/"+name] }

// EndpointMembers are the ready members of svc on service port sp, as
// an Ingress's pool gets them; those the policy refuses are described
// in refused.
func (i *Index) EndpointMembers(svc *corev1.Service, sp *corev1.ServicePort, policy MemberPolicy) (members []model.Member, refused []string) {
	return i.x.endpointMembers(svc, sp, policy)
}

// UDPMembers are the ready IPv4 members of svc on its UDP service port
// sp, as a native Service's pool gets them.
func (i *Index) UDPMembers(svc *corev1.Service, sp *corev1.ServicePort, policy MemberPolicy) (members []model.Member, refused []string) {
	return i.x.serviceMembers(svc, *sp, policy)
}

// UDPServicePort is the UDP port numbered port of svc, or nil.
func UDPServicePort(svc *corev1.Service, port int32) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		if sp := &svc.Spec.Ports[i]; sp.Protocol == corev1.ProtocolUDP && sp.Port == port {
			return sp
		}
	}
	return nil
}

// ServicePort is the TCP port of svc that p names, or nil.
func ServicePort(svc *corev1.Service, p networkingv1.ServiceBackendPort) *corev1.ServicePort {
	return findServicePort(svc, p)
}

// ClusterIPMembers is the Service's ClusterIP as a pool's only member
// (--members-from-cluster-ip), under the same policy as endpoints.
func ClusterIPMembers(svc *corev1.Service, sp *corev1.ServicePort, policy MemberPolicy) (members []model.Member, refused []string) {
	return clusterIPMembers(svc, sp, policy)
}

// SortMembers orders members by address then port and drops duplicates.
func SortMembers(ms []model.Member) []model.Member { return sortMembers(ms) }

// Certificate checks the TLS Secret sec (namespace/name) and describes it
// for the hosts it serves.
func Certificate(sec *corev1.Secret, namespace, name string, hosts []string) (model.Certificate, error) {
	cert, _, err := certificate(sec, namespace, name, hosts)
	return cert, err
}

// Quote makes a user string safe to show in a problem, a log or a
// condition: truncated, its control, format and bidi characters escaped.
func Quote(s string) string { return annotation.QuoteForMessage(s) }

// CheckHost validates a host name (a wildcard one too) and says how to
// compare it; "" matches every request.
func CheckHost(h string) (model.CompareType, error) { return checkHost(h) }

// CheckPath validates a path for its Ingress pathType and returns the
// value and comparison the model uses.
func CheckPath(path string, pt *networkingv1.PathType) (string, model.CompareType, error) {
	return checkPath(path, pt)
}

// PlainPath accepts an absolute path of letters, digits and ._~/- only
// (safe as a log-format argument); what names it in the error.
func PlainPath(what, v string) (string, error) { return annotation.PlainPath(what, v) }

// PathRank orders path comparisons as routes are tried: Exact, regular
// expressions, then Prefix.
func PathRank(c model.CompareType) int { return pathRank(c) }

// ValidUID keeps a UID only if it has the API server's form (UIDs become
// folder names).
func ValidUID(uid string) string { return validUID(uid) }

// NameUUID is a version-5-style UUID over pier's namespace and parts,
// for an object without a usable UID.
func NameUUID(parts ...string) string { return nameUUID(parts...) }

// MayPin reports whether an object of namespace ns may ask for an
// address of its own (--external-ip-namespaces).
func (o Options) MayPin(ns string) bool { return o.mayPin(ns) }

// SortProblems orders problems by kind, namespace, name, as a Result
// holds them.
func SortProblems(ps []model.Problem) { sortProblems(ps) }

// NamespaceQuota counts, per namespace, the objects of one kind served
// so far against a limit (0: no quota).
type NamespaceQuota struct{ q *namespaceQuota }

// NewNamespaceQuota is a quota of limit objects per namespace.
func NewNamespaceQuota(limit int) *NamespaceQuota {
	return &NamespaceQuota{q: newNamespaceQuota(limit)}
}

// Full reports whether namespace ns may be given no more.
func (q *NamespaceQuota) Full(ns string) bool { return q.q.full(ns) }

// Take counts one more object of namespace ns.
func (q *NamespaceQuota) Take(ns string) { q.q.take(ns) }
