// Package model is pier's load-balancer vocabulary, borrowed from OpenStack
// Octavia / Neutron LBaaS v2 as the seeds use it:
//
//	LoadBalancer → Listener → L7Policy → L7Rule
//	LoadBalancer → Pool → Member
//
// It imports nothing from client-go: translation produces these values, the
// store keeps them, the scheduler places them and the agent renders them.
// Every identifier (UUID, pool ID, policy ID, certificate ID) is derived by
// pier from UIDs or hashes, never taken from a user string, so drivers can
// use them verbatim in file names and HAProxy section names.
package model

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// Provider selects the driver a LoadBalancer is dispatched to (the seed's
// loadbalancer_provider).
type Provider string

const (
	// ProviderHAProxy is the L7 provider used for Ingress (the seed's
	// "opencontrail"): HAProxy active/standby on two nodes.
	ProviderHAProxy Provider = "haproxy"
	// ProviderNative is the L4 provider used for Services of type
	// LoadBalancer (the seed's ECMP load balancer).
	ProviderNative Provider = "native"
)

// BGPState is what a node advertises for a LoadBalancer's addresses.
type BGPState string

const (
	BGPPreferred  BGPState = "preferred"
	BGPAdvertised BGPState = "advertised"
	BGPWithdrawn  BGPState = "withdrawn"
	// BGPECMP: advertised with the same preference as every other node
	// of an ECMP placement; the router spreads the flows over them.
	BGPECMP BGPState = "ecmp"
)

// LoadBalancer is the unit the store keeps and the agent applies. Spec
// fields are written by the controller; Status is written by agents.
type LoadBalancer struct {
	UUID     string   `json:"uuid"`
	Name     string   `json:"name"` // display only: "ns/ingress" or "group:<name>"
	Provider Provider `json:"provider"`

	// VIP is the internal virtual IP; FIP the floating (public) IP, empty
	// when no public pool is configured and none is pinned.
	VIP string `json:"vip,omitempty"`
	FIP string `json:"fip,omitempty"`
	// RequestedFIP is the address pinned by the pier.dev/external-ip
	// annotation; IPAM either grants it as FIP or refuses the request.
	RequestedFIP string `json:"requestedFip,omitempty"`
	// AccessLog is the pier.dev/access-log annotation's value in the
	// form ParseAccessLog reads ("on", "off", "sample=N"); empty: the
	// agent's --access-log.
	AccessLog string `json:"accessLog,omitempty"`

	Placement Placement  `json:"placement"`
	Sources   []Source   `json:"sources"`
	Listeners []Listener `json:"listeners"`
	Pools     []Pool     `json:"pools"`

	CreatedAt time.Time `json:"createdAt"`
	Status    Status    `json:"status"`
}

// Source is an object a LoadBalancer serves (an Ingress for the haproxy
// provider, a Service for native).
type Source struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Key is "namespace/name".
func (s Source) Key() string { return s.Namespace + "/" + s.Name }

// Placement names the nodes that run a LoadBalancer. Standby may be empty
// when only one node is available (pier run has exactly one). The
// scheduler picks the nodes; the controller fills in the rest, so an
// agent configures VRRP from the placement alone, without reading Nodes.
type Placement struct {
	Active  string `json:"active,omitempty"`
	Standby string `json:"standby,omitempty"`
	// RouterID is the VRRP virtual router id of the ordered pair (Active,
	// Standby): every LoadBalancer on the same pair shares it (one VRRP
	// instance carries all their addresses), the reversed pair has
	// another. 0 when there is no standby: one node needs no VRRP.
	RouterID int `json:"routerId,omitempty"`
	// ActiveAddress and StandbyAddress are the nodes' addresses on the
	// segment (unicast VRRP peers); empty when a node has none known.
	ActiveAddress  string `json:"activeAddress,omitempty"`
	StandbyAddress string `json:"standbyAddress,omitempty"`
	// ECMP, when not empty, names every node that serves the load
	// balancer at once, sorted (a native load balancer placed with
	// --native-ecmp): each advertises its addresses over BGP with the
	// same preference and the routers spread the flows. Active and
	// Standby are then its first two, for the readers of a pair.
	ECMP []string `json:"ecmp,omitempty"`
}

// Has reports whether p places the load balancer on node.
func (p Placement) Has(node string) bool {
	if node == "" {
		return false
	}
	return node == p.Active || node == p.Standby || slices.Contains(p.ECMP, node)
}

// Protocol of a Listener.
type Protocol string

const (
	ProtocolHTTP             Protocol = "HTTP"
	ProtocolTerminatedHTTPS  Protocol = "TERMINATED_HTTPS"
	DefaultHTTPListenerName           = "http"
	DefaultHTTPSListenerName          = "https"
)

// ProtocolTCP and ProtocolUDP are the L4 listeners of the native provider
// (one per Service port): no policies, only a default pool.
const (
	ProtocolTCP Protocol = "TCP"
	ProtocolUDP Protocol = "UDP"
)

// Listener is one port of a LoadBalancer with its routing table.
type Listener struct {
	Name     string   `json:"name"` // "http" or "https": ours, never the user's
	Protocol Protocol `json:"protocol"`
	Port     int      `json:"port"`
	// DefaultPoolID is where requests that match no policy go; empty means
	// pier answers 404 itself.
	DefaultPoolID string `json:"defaultPoolId,omitempty"`
	// Certificates are served by SNI on TERMINATED_HTTPS listeners; the
	// first one is also the fallback for clients without a matching SNI.
	Certificates []Certificate `json:"certificates,omitempty"`
	// StrictSNI refuses TLS clients whose SNI matches no certificate
	// instead of serving them the first one: set when that one would not
	// be the owner's (a shared load balancer whose owner has no
	// certificate).
	StrictSNI bool `json:"strictSni,omitempty"`
	// Policies are ordered: the first policy whose rules all match wins.
	Policies []L7Policy `json:"policies,omitempty"`
	// ListenerHosts, on a TERMINATED_HTTPS listener that several Gateway
	// listeners share, are their hostnames ("" for one without, "*.x" a
	// wildcard of one or more labels). A request belongs to the most
	// specific one its name matches; one whose Host belongs to another
	// than its TLS SNI does answers 421 Misdirected Request (the Gateway
	// API's GatewayHTTPSListenerDetectMisdirectedRequests). Empty: no
	// check.
	ListenerHosts []string `json:"listenerHosts,omitempty"`
	// Passthrough, on a TERMINATED_HTTPS listener, sends TLS connections
	// whose SNI is one of its hosts to a TCP pool untouched, before any
	// termination (ingress-nginx's ssl-passthrough); other connections
	// are terminated as usual. A listener with Passthrough may have no
	// certificates: then it terminates nothing and refuses other SNIs.
	Passthrough []PassthroughRoute `json:"passthrough,omitempty"`
	// DecryptCertificates are served by SNI by the frontend that
	// terminates the Decrypt routes of Passthrough (a Gateway's TLS
	// listeners in tls.mode Terminate), apart from Certificates: a
	// listener with these alone has no HTTP frontend.
	DecryptCertificates []Certificate `json:"decryptCertificates,omitempty"`
	// ClientValidation, on a TERMINATED_HTTPS listener, asks TLS clients
	// for a certificate and checks it against CAs (a Gateway's
	// spec.tls.frontend); nil asks for none.
	ClientValidation *ClientValidation `json:"clientValidation,omitempty"`
}

// AllCertificates are every certificate the listener's binds serve
// (Certificates, then DecryptCertificates): the files the agent writes.
func (l *Listener) AllCertificates() []Certificate {
	if len(l.DecryptCertificates) == 0 {
		return l.Certificates
	}
	return append(append([]Certificate(nil), l.Certificates...), l.DecryptCertificates...)
}

// PassthroughRoute passes every TLS connection for Host (the SNI,
// lowercase) to PoolID, a TCP pool whose members terminate TLS themselves.
// Host is an exact name (an Ingress's ssl-passthrough, a TLSRoute's), a
// Gateway wildcard "*.example.com" (any name ending in ".example.com",
// over any number of labels; the longest wildcard wins, after every exact
// name), or "" for every other connection, those without SNI included
// (a TLS listener without hostname); without a "" route the others are
// terminated. PoolID "" refuses the connection (a TLS listener's host no
// TLSRoute serves: it must not reach another listener). Terminate hands
// the connection to the listener's terminating frontend (a host an HTTPS
// listener owns that a TLS listener's wildcard or catch-all also
// matches); it has no PoolID. Decrypt terminates TLS with the
// listener's DecryptCertificates and passes the plain bytes to PoolID (a
// TLSRoute on a TLS listener in tls.mode Terminate).
type PassthroughRoute struct {
	Host      string `json:"host"`
	PoolID    string `json:"poolId"`
	Terminate bool   `json:"terminate,omitempty"`
	Decrypt   bool   `json:"decrypt,omitempty"`
	Source    Source `json:"source"` // the Ingress or TLSRoute that asked for it
}

// Certificate references a kubernetes.io/tls Secret. The key material is
// not copied into the LoadBalancer (the store may be a custom resource that
// many can read); the agent fetches it, re-validates it and checks that
// its canonical form still hashes to SHA256.
type Certificate struct {
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
	Secret    string    `json:"secret"`
	Hosts     []string  `json:"hosts"` // SNI names, validated host syntax
	SHA256    string    `json:"sha256"`
	NotAfter  time.Time `json:"notAfter"`
	// Default marks the operator's default certificate
	// (--default-certificate): it is served to clients whose SNI matches
	// no other certificate (or who send none), and matches no name of its
	// own, so a tenant's certificate for a name it also covers still wins.
	// At most one per listener, first.
	Default bool `json:"default,omitempty"`
}

// PolicyAction is what an L7Policy does with a matching request.
type PolicyAction string

const (
	ActionRedirectToPool PolicyAction = "REDIRECT_TO_POOL"
	ActionReject         PolicyAction = "REJECT"
	// ActionFixedResponse answers StatusCode itself (Octavia has no such
	// action): an HTTPRoute rule whose backendRefs all fail to resolve
	// answers 500, as the Gateway API asks; a request a Gateway listener
	// owns that none of its routes match, 404 (listener isolation).
	ActionFixedResponse PolicyAction = "FIXED_RESPONSE"
)

// L7Policy is one routing decision: all Rules must match (logical AND).
type L7Policy struct {
	ID       string       `json:"id"`
	Position int          `json:"position"` // 1-based, dense
	Action   PolicyAction `json:"action"`
	PoolID   string       `json:"poolId,omitempty"`
	Rules    []L7Rule     `json:"rules"`
	Source   Source       `json:"source"` // the Ingress that asked for it
	// Options are the per-Ingress behaviours of a REDIRECT_TO_POOL
	// policy (annotations); nil for none, which renders as before.
	Options *PolicyOptions `json:"options,omitempty"`
	// StatusCode is what a FIXED_RESPONSE policy answers (500-504, or
	// 404 for a Gateway listener's isolation entry); 0 for the other
	// actions.
	StatusCode int `json:"statusCode,omitempty"`
}

// RuleType is what part of the request an L7Rule inspects.
type RuleType string

const (
	RuleHostName RuleType = "HOST_NAME"
	RulePath     RuleType = "PATH"
	// RuleHeader (Octavia's HEADER), RuleQuery and RuleMethod come from
	// HTTPRoute matches; they compare EQUAL_TO only. Key names the header
	// (lowercase) or the query parameter (case kept). Render routes on
	// them through its match maps (render/matches.go); translation emits
	// them unless translate.Options.GatewayExtendedMatches is off.
	RuleHeader RuleType = "HEADER"
	RuleQuery  RuleType = "QUERY_PARAMETER"
	RuleMethod RuleType = "METHOD"
)

// CompareType is how an L7Rule compares. The semantics are Kubernetes
// Ingress v1's, not Octavia's plain string operators:
//
//   - HOST_NAME EQUAL_TO: the request host (port stripped, lowercased) equals Value.
//   - HOST_NAME WILDCARD: Value is "*.suffix"; the host is exactly one DNS
//     label followed by ".suffix".
//   - HOST_NAME SUFFIX: Value is "*.suffix"; the host is one or more DNS
//     labels followed by ".suffix" (a Gateway API wildcard).
//   - PATH EQUAL_TO: the request path equals Value (pathType Exact).
//   - PATH STARTS_WITH: element-wise prefix (pathType Prefix): Value has no
//     trailing slash, and the path equals Value or starts with Value + "/".
//     Value "/" matches every path.
//   - PATH REGEX: Value is a regular expression of encode.ParsePathRegex's
//     subset (ingress-nginx use-regex), matched case-sensitively against
//     the path from its start (a match need not reach the end). Between
//     the two above in precedence: Exact, then REGEX (longer Value
//     first), then Prefix.
type CompareType string

const (
	CompareEqualTo    CompareType = "EQUAL_TO"
	CompareStartsWith CompareType = "STARTS_WITH"
	CompareWildcard   CompareType = "WILDCARD"
	CompareSuffix     CompareType = "SUFFIX"
	CompareRegex      CompareType = "REGEX"
)

// L7Rule is one condition of an L7Policy. Value has been validated by
// translation against the allow-list for its type.
type L7Rule struct {
	Type    RuleType    `json:"type"`
	Compare CompareType `json:"compare"`
	// Key is the header or query parameter name of a HEADER or
	// QUERY_PARAMETER rule; empty (and not serialised) otherwise, so the
	// spec hash of existing load balancers does not change.
	Key   string `json:"key,omitempty"`
	Value string `json:"value"`
}

// Pool is one backend Service port (Kuryr's "<ns>_<svc>" pool).
type Pool struct {
	ID        string    `json:"id"`   // ours: a hash of namespace, service and port
	Name      string    `json:"name"` // display: "<ns>_<svc>_<port>"
	Namespace string    `json:"namespace"`
	Service   string    `json:"service"`
	Port      string    `json:"port"` // the Ingress's port: number or name
	Algorithm Algorithm `json:"algorithm"`
	// HealthCheck turns on active TCP checks of members.
	HealthCheck bool     `json:"healthCheck"`
	Members     []Member `json:"members"`
	// ConnectTimeout and ServerTimeout replace the defaults' timeout
	// connect and timeout server for this pool; 0 keeps the default.
	ConnectTimeout time.Duration `json:"connectTimeout,omitempty"`
	ServerTimeout  time.Duration `json:"serverTimeout,omitempty"`
	// Affinity, when set, keeps a client on one member with a cookie
	// HAProxy inserts (ingress-nginx's affinity: cookie).
	Affinity *CookieAffinity `json:"affinity,omitempty"`
	// Protocol is how HAProxy talks to the members; "" is plain HTTP/1.1
	// (ingress-nginx's backend-protocol).
	Protocol BackendProtocol `json:"protocol,omitempty"`
	// Tries bounds the attempts at a request, the first included
	// (ingress-nginx's proxy-next-upstream-tries): HAProxy's retries is
	// Tries-1. 0 keeps the defaults' retries (3).
	Tries int `json:"tries,omitempty"`
	// RetryStatuses are the response codes that make HAProxy try the
	// request again (retry-on; 401, 403, 404, 408, 425 and 500-504
	// only), and RetryTimeout a response timeout too, besides connection
	// failures and empty responses (an HTTPRoute rule's retry). Both
	// empty keep the defaults' retry-on.
	RetryStatuses []int `json:"retryStatuses,omitempty"`
	RetryTimeout  bool  `json:"retryTimeout,omitempty"`
	// Deadline bounds a request across all its attempts (an HTTPRoute
	// rule's timeouts.request with retry); 0: none. HAProxy's timeouts
	// bound one attempt each, so an answer that arrives after the
	// deadline, because retries outlasted it, is replaced by a 504.
	Deadline time.Duration `json:"deadline,omitempty"`
	// ServiceUpstream says the members are the Service's ClusterIP and
	// port rather than its endpoints (service-upstream): kube-proxy picks
	// the Pod, the seed's two-hop mode.
	ServiceUpstream bool `json:"serviceUpstream,omitempty"`
	// UpstreamTLS verifies the members' certificates, sends them SNI or
	// presents a client certificate (ingress-nginx's proxy-ssl-*); only
	// with an HTTPS or GRPCS Protocol. nil keeps TLS unverified.
	UpstreamTLS *UpstreamTLS `json:"upstreamTls,omitempty"`
	// TCP makes the pool a TCP backend (ssl-passthrough): bytes are
	// forwarded, no HTTP is parsed; no affinity, protocol or UpstreamTLS.
	TCP bool `json:"tcp,omitempty"`
	// FailWeight of every FailTotal requests to the pool are answered 500
	// instead (an HTTPRoute rule's backendRefs that do not resolve, the
	// share the spec wants answered 500); 0 for none. In a UDP pool (a
	// UDPRoute's) it is the share of new flows refused with ICMP port
	// unreachable: refs that do not resolve or have no endpoint. A UDP
	// pool's member weights are its Services' shares (any size; 0
	// counts as 1).
	FailWeight int `json:"failWeight,omitempty"`
	FailTotal  int `json:"failTotal,omitempty"`
	// RequestHeaders are applied in order to every request sent to this
	// pool, after the policy's (an HTTPRoute backendRef's
	// RequestHeaderModifier). A pool with them is one of its own, never
	// a Service's pool that others share.
	RequestHeaders []HeaderOp `json:"requestHeaders,omitempty"`
	// RewritePath replaces the path of every request sent to this pool,
	// and PrefixRewrite its matched prefix (at most one of the two), after
	// the policy's changes (an HTTPRoute backendRef's URLRewrite). A pool
	// with either is one of its own, as with RequestHeaders.
	RewritePath   string         `json:"rewritePath,omitempty"`
	PrefixRewrite *PrefixRewrite `json:"prefixRewrite,omitempty"`
}

// UpstreamTLS is a pool's TLS towards its members. The CA and the client
// certificate stay in their Secret (as Certificate's key material does):
// the agent reads it, validates it again and serves it only while its
// canonical form still hashes to CASHA256 and ClientSHA256.
type UpstreamTLS struct {
	// Verify requires the member's chain to lead to the Secret's ca.crt
	// and its certificate to carry Name.
	Verify bool `json:"verify,omitempty"`
	// Name is the host name checked (with Verify) and sent as SNI (with
	// SNI); validated host syntax.
	Name string `json:"name,omitempty"`
	SNI  bool   `json:"sni,omitempty"`
	// VerifyHost, when set, is the host name checked instead of Name
	// (a BackendTLSPolicy's one subjectAltName); Name stays the SNI.
	VerifyHost string `json:"verifyHost,omitempty"`
	// Namespace and Secret name the Secret holding ca.crt and,
	// optionally, tls.crt and tls.key; empty when none is named.
	Namespace string `json:"namespace,omitempty"`
	Secret    string `json:"secret,omitempty"`
	// CASHA256 is the digest of the canonical ca.crt ("" without one);
	// ClientSHA256 that of the canonical client pair ("" without one).
	CASHA256     string `json:"caSha256,omitempty"`
	ClientSHA256 string `json:"clientSha256,omitempty"`
	// CAPEM is the canonical CA bundle itself when it comes from
	// ConfigMaps (a BackendTLSPolicy's caCertificateRefs) rather than a
	// Secret: certificates are public, and carried here the agent needs
	// no read access to ConfigMaps. It still hashes to CASHA256, which
	// the agent checks before writing it.
	CAPEM string `json:"caPem,omitempty"`
}

// BackendProtocol is a Pool's protocol to its members. TLS to members is
// not verified and sends no SNI (ingress-nginx's defaults,
// proxy-ssl-verify off) unless the Pool's UpstreamTLS says otherwise.
type BackendProtocol string

const (
	BackendHTTPS BackendProtocol = "HTTPS" // HTTP/1.1 over TLS
	BackendGRPC  BackendProtocol = "GRPC"  // HTTP/2 in clear (h2c)
	BackendGRPCS BackendProtocol = "GRPCS" // HTTP/2 over TLS (ALPN h2)
)

// CookieAffinity is a pool's session cookie: HAProxy inserts Name (with
// the server's slot as value, HttpOnly) in responses to clients without
// it, and sends a client with it to that server while it is up. The
// slot, not the member's address, so that no address reaches clients
// and a member keeps its clients while it keeps its slot.
type CookieAffinity struct {
	// Name is 1-64 letters, digits, '_' or '-'.
	Name string `json:"name"`
	// Path is the cookie's Path attribute, a path; "" leaves HAProxy's
	// "path=/".
	Path string `json:"path,omitempty"`
	// MaxAgeSeconds is the cookie's Max-Age; 0 is a session cookie.
	MaxAgeSeconds int `json:"maxAgeSeconds,omitempty"`
	// MaxLifeSeconds, with a session cookie (MaxAgeSeconds 0), is how
	// long after it was set HAProxy still honours it (cookie maxlife; a
	// Max-Age sets maxlife itself); MaxIdleSeconds how long after it was
	// last seen (maxidle). An expired cookie is ignored and replaced.
	// 0: no bound (Gateway API sessionPersistence absoluteTimeout and
	// idleTimeout).
	MaxLifeSeconds int `json:"maxLifeSeconds,omitempty"`
	MaxIdleSeconds int `json:"maxIdleSeconds,omitempty"`
	// SameSite is "", "None", "Lax" or "Strict"; "None" also sets
	// Secure, without which browsers drop the cookie.
	SameSite string `json:"sameSite,omitempty"`
	// Secure says when the cookie gets the Secure attribute: "" on
	// responses to HTTPS requests (ingress-nginx's default), CookieSecureAlways
	// on every response, CookieSecureNever on none. SameSite "None"
	// sets it on every response whatever this says.
	Secure CookieSecure `json:"secure,omitempty"`
}

// CookieSecure is when a session cookie is Secure.
type CookieSecure string

const (
	CookieSecureAlways CookieSecure = "Always"
	CookieSecureNever  CookieSecure = "Never"
)

// Algorithm is a Pool's load-balancing algorithm (Octavia's names).
type Algorithm string

const (
	AlgorithmRoundRobin       Algorithm = "ROUND_ROBIN"
	AlgorithmLeastConnections Algorithm = "LEAST_CONNECTIONS"
	AlgorithmSourceIP         Algorithm = "SOURCE_IP"
)

// Member is one endpoint of a Pool.
type Member struct {
	Address string `json:"address"`
	Port    int    `json:"port"`
	Weight  int    `json:"weight"`
	// Target names the endpoint (a pod name) for people; never rendered.
	Target string `json:"target,omitempty"`
}

// ID derives a stable identifier from parts. It is the only way pier names
// things that end up in HAProxy files: 16 lowercase hex digits.
func ID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}
