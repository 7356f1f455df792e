package translate

// Namespace quotas. The global caps (MaxIngresses, MaxHTTPRoutes) are
// first come, first served across namespaces: one tenant that fills one
// leaves every other tenant's next object refused. A quota bounds what
// one namespace takes of each, so that the cap is only reached by many
// tenants together; the global cap stays the last line. Within a
// namespace, as for the caps, the oldest objects are served and the
// newest past the quota refused, so an existing object never loses its
// place to a newer one.
//
// The defaults are far above what one application's namespace holds (a
// large one has tens of Ingresses and a few Gateways) and keep one
// namespace to a tenth of each global cap: ten namespaces must fill it
// together.
const (
	DefaultMaxIngressesPerNamespace  = 1000 // a tenth of MaxIngresses' 10,000
	DefaultMaxHTTPRoutesPerNamespace = 1000 // a tenth of MaxHTTPRoutes' 10,000
	// A Gateway is a load balancer of its own (addresses, a frontend in
	// a shared HAProxy process): a team has one or a few.
	DefaultMaxGatewaysPerNamespace = 100
)

// ReasonQuotaExceeded is the problem reason (and the condition reason of
// Gateways and HTTPRoutes) of an object refused by a namespace quota, as
// the controller's quota on load balancers and floating IPs says it.
const ReasonQuotaExceeded = "QuotaExceeded"

// namespaceQuota counts, per namespace, the objects of one kind served
// so far against limit (0: no quota).
type namespaceQuota struct {
	limit int
	used  map[string]int
}

func newNamespaceQuota(limit int) *namespaceQuota {
	return &namespaceQuota{limit: limit, used: map[string]int{}}
}

// full reports whether namespace ns may be given no more.
func (q *namespaceQuota) full(ns string) bool { return q.limit > 0 && q.used[ns] >= q.limit }

// take counts one more object of namespace ns.
func (q *namespaceQuota) take(ns string) { q.used[ns]++ }
