package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"pier.dev/pier/internal/agent"
	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/cluster"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/translate"
)

// Flag groups shared by the commands: each flag is declared once, with
// its help, and registered by every command that takes it. A group's
// value method turns the parsed flags into the config its package wants.

// kubeconfigFlag is how `pier controller` and `pier agent` reach the API.
func kubeconfigFlag(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "kubeconfig", "", "kubeconfig file; empty: in-cluster configuration")
}

// apiRateFlags is how fast `pier controller` and `pier agent` may talk to
// the API server.
func apiRateFlags(fs *flag.FlagSet, rate *cluster.APIRate, def cluster.APIRate) {
	*rate = def
	fs.Func("kube-api-qps", fmt.Sprintf("requests a second this process may send the API server, sustained (default %g; client-go's own 5 throttles a cluster's worth of writes)", def.QPS), func(v string) error {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil || f <= 0 {
			return fmt.Errorf("want a number above 0, got %q", v)
		}
		rate.QPS = float32(f)
		return nil
	})
	fs.IntVar(&rate.Burst, "kube-api-burst", def.Burst, "requests this process may send the API server at once above --kube-api-qps")
}

// apiAddrFlag is the read-only HTTP API of a long-running command, and
// the host names it answers besides its address.
func apiAddrFlag(fs *flag.FlagSet, addr *string, hosts *[]string, def, usage string) {
	fs.StringVar(addr, "api-addr", def, usage)
	fs.Var(allowedHostsFlag{hosts}, "api-allowed-hosts",
		"comma-separated host names (or addresses) the API answers in a request's Host besides the --api-addr address itself "+
			"(and localhost when that is a loopback or wildcard address), e.g. a Service name or a proxy's name; others get 421, "+
			"so that a web page cannot read the API through a name it points at this address (DNS rebinding) (repeatable)")
}

// allowedHostsFlag is --api-allowed-hosts: a commaList of names checked
// as they are parsed.
type allowedHostsFlag struct{ names *[]string }

func (f allowedHostsFlag) String() string {
	if f.names == nil {
		return ""
	}
	return strings.Join(*f.names, ",")
}

func (f allowedHostsFlag) Set(v string) error {
	var add commaList
	_ = add.Set(v)
	if err := api.CheckAllowedHosts(add); err != nil {
		return err
	}
	*f.names = append(*f.names, add...)
	return nil
}

const apiUsage = "address of the read-only HTTP API (/loadbalancers, /ingresses/NS/NAME, /healthz, /metrics)"

// poolFlags are the address pools of IPAM (pier run and the controller).
type poolFlags struct {
	internal, public string
	quarantine       time.Duration
	lbShare          share // --max-load-balancers-per-namespace
	fipShare         share // --max-public-ips-per-namespace
}

// defaultQuarantine outlasts a typical DNS TTL (5 min) twice: clients
// that still resolve a deleted load balancer's address must not reach a
// newcomer, and its owner, re-created, gets the same address back.
const defaultQuarantine = 10 * time.Minute

func (p *poolFlags) register(fs *flag.FlagSet, internalDef, internalUsage, publicDef string) {
	fs.StringVar(&p.internal, "internal-pool", internalDef, internalUsage)
	fs.StringVar(&p.public, "public-pool", publicDef, "CIDR the floating IPs are allocated from; empty for none")
	p.registerQuota(fs)
	fs.DurationVar(&p.quarantine, "address-quarantine", defaultQuarantine, "how long a freed VIP or floating IP stays reserved for the Ingress or group that held it (re-created, it gets it back) before anyone else may take it; 0 frees at once")
}

// routerIDFlag is the range of VRRP router ids pier numbers its node
// pairs from (pier run and the controller). Two installations on one L2
// segment must use disjoint ranges: ids are unique per segment.
func routerIDFlag(fs *flag.FlagSet, ids *string) {
	fs.StringVar(ids, "vrrp-router-ids", "1-255", "range FIRST-LAST of VRRP router ids for active/standby node pairs (one id per ordered pair); split 1-255 between pier installations sharing a segment")
}

// translateFlags select and bound the Ingresses pier serves (pier run
// and the controller).
type translateFlags struct {
	opts translate.Options
	// ingShare and routeShare are the per-namespace quotas as shares of
	// MaxIngresses and MaxHTTPRoutes (options resolves them).
	ingShare, routeShare share
}

func (t *translateFlags) register(fs *flag.FlagSet) {
	t.opts = translate.DefaultOptions()
	fs.StringVar(&t.opts.ControllerName, "controller-name", translate.DefaultControllerName, "IngressClass spec.controller value that selects pier's classes")
	fs.BoolVar(&t.opts.TakeClassless, "classless-ingresses", false, "also serve Ingresses that name no class when no IngressClass of ours is the default")
	fs.BoolVar(&t.opts.TakeClasslessServices, "classless-services", false, "also serve Services of type LoadBalancer that name no loadBalancerClass (by default only class pier.dev/native)")
	fs.BoolVar(&t.opts.MembersFromClusterIP, "members-from-cluster-ip", false, "proxy to the Service ClusterIP instead of the ready endpoints (the seed's two-hop mode)")
	fs.Func("default-certificate", "a TLS Secret namespace/name (in pier run, one of the manifests): every Ingress's load balancer listens for HTTPS, serving it to clients whose SNI matches none of its own certificates, so routes without spec.tls answer over HTTPS and force-ssl-redirect has somewhere to send clients (ingress-nginx's --default-ssl-certificate); the Secret must be of type kubernetes.io/tls (in a namespace pier watches)", func(v string) error {
		if err := translate.ParseDefaultCertificate(v); err != nil {
			return err
		}
		t.opts.DefaultCertificate = v
		return nil
	})
	fs.BoolVar(&t.opts.HealthChecks, "health-checks", t.opts.HealthChecks, "check every pool member with a TCP connect (inter 2s, fall 3, rise 2), so that a member nobody can reach gets no requests and shows down; an Ingress opts out with pier.dev/health-check: \"false\". false: only Ingresses that set it \"true\" are checked")
	fs.IntVar(&t.opts.MaxIngresses, "max-ingresses", t.opts.MaxIngresses, "refuse Ingresses beyond this many (newest first)")
	fs.IntVar(&t.opts.MaxHTTPRoutes, "max-httproutes", t.opts.MaxHTTPRoutes, "refuse HTTPRoutes and GRPCRoutes (counted together) attached to pier's Gateways beyond this many (newest first)")
	fs.IntVar(&t.opts.MaxPathsPerIngress, "max-paths-per-ingress", t.opts.MaxPathsPerIngress, "refuse an Ingress with more paths than this")
	t.registerQuota(fs)
	fs.BoolVar(&t.opts.GatewayExtendedMatches, "gateway-extended-matches", t.opts.GatewayExtendedMatches, "route HTTPRoute header, query-parameter and method matches; false refuses such routes with a reason (while agents of a version that cannot render them still run)")
	fs.Var((*commaList)(&t.opts.AuthURLNamespaces), "auth-url-namespaces", "comma-separated namespaces whose Services the auth-url of an Ingress of any namespace may name, such as an oauth2-proxy of its own (repeatable); empty: an auth-url names a Service of its Ingress's namespace only")
	fs.Var((*commaList)(&t.opts.ExternalIPNamespaces), "external-ip-namespaces", "comma-separated namespaces whose Ingresses may pin an address with pier.dev/external-ip (Services with spec.loadBalancerIP, Gateways with spec.addresses) (repeatable); empty: every namespace")
	fs.BoolVar(&t.opts.IgnoreSnippets, "ignore-snippets", false, "serve an Ingress with snippet annotations (configuration-snippet, server-snippet, auth-snippet, …) with the snippet ignored and a Warning, during a migration; without it such an Ingress is refused with the typed alternative, as ingress-nginx does with snippets disabled: a dropped snippet may have been a rule (a deny, an auth check, a security header)")
	fs.BoolVar(&t.opts.IgnoreProtections, "ignore-protection-annotations", false, "serve an Ingress whose client-certificate (auth-tls-secret) or ModSecurity (enable-modsecurity, enable-owasp-core-rules) annotations pier cannot honour, without that protection and with a Warning; without it such an Ingress is refused (ProtectionRefused), since served without the check every client or request its author kept out gets in")
	fs.Func("default-load-balancer-group", "GROUP: every Ingress without pier.dev/load-balancer joins the load balancer group GROUP, shared by every namespace: one load balancer and one address for the whole class, as ingress-nginx answers every Ingress on its own address (hosts still belong to the namespace of their oldest Ingress). Empty: each Ingress gets its own load balancer", func(v string) error {
		if v != "" {
			if err := annotation.ValidGroupName(v); err != nil {
				return fmt.Errorf("--default-load-balancer-group: %w", err)
			}
		}
		t.opts.DefaultGroup = v
		return nil
	})
	fs.Var(sharedGroupsFlag{&t.opts.SharedGroups}, "shared-load-balancer", "GROUP=NS1,NS2,…: let these namespaces share the pier.dev/load-balancer group GROUP (one load balancer, one address); \"*\" for every namespace. Repeatable. Without it a group is per namespace")
}

// commaList is a repeatable flag of comma-separated values.
type commaList []string

func (c *commaList) String() string { return strings.Join(*c, ",") }
func (c *commaList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*c = append(*c, s)
		}
	}
	return nil
}

// sharedGroupsFlag parses --shared-load-balancer GROUP=NS1,NS2.
type sharedGroupsFlag struct{ m *map[string][]string }

func (f sharedGroupsFlag) String() string {
	if f.m == nil {
		return ""
	}
	var parts []string
	for g, ns := range *f.m {
		parts = append(parts, g+"="+strings.Join(ns, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (f sharedGroupsFlag) Set(v string) error {
	group, list, ok := strings.Cut(v, "=")
	var namespaces commaList
	_ = namespaces.Set(list)
	if !ok || strings.TrimSpace(group) == "" || len(namespaces) == 0 {
		return fmt.Errorf("want GROUP=NAMESPACE[,NAMESPACE…], got %q", v)
	}
	if *f.m == nil {
		*f.m = map[string][]string{}
	}
	group = strings.TrimSpace(group)
	(*f.m)[group] = append((*f.m)[group], namespaces...)
	return nil
}

// registerPorts adds the listening ports, which only pier run sets (in
// Kubernetes mode they are the defaults).
func (t *translateFlags) registerPorts(fs *flag.FlagSet) {
	fs.IntVar(&t.opts.HTTPPort, "http-port", 80, "port HAProxy listens on for HTTP on every VIP and FIP")
	fs.IntVar(&t.opts.HTTPSPort, "https-port", 443, "port HAProxy listens on for HTTPS (only load balancers with TLS certificates)")
}

// statusFlags say what Ingress status publishes.
type statusFlags struct {
	static  stringList
	service string
}

func (s *statusFlags) register(fs *flag.FlagSet) {
	fs.Var(&s.static, "status-address", "publish this address in every Ingress status instead of its VIP and FIP (repeatable)")
}

// registerService adds --status-service (Kubernetes mode: it reads a
// Service's own status).
func (s *statusFlags) registerService(fs *flag.FlagSet) {
	fs.StringVar(&s.service, "status-service", "", "publish the addresses of this Service's status.loadBalancer (namespace/name) in every Ingress status; with --watch-namespace it must live in that namespace")
}

func (s *statusFlags) value() status.Addresses {
	return status.Addresses{Static: s.static, Service: s.service}
}

// DefaultLandingBackends is --haproxy-landing-backends's default: room
// for 64 pools of new load balancers between two fold-ins.
const DefaultLandingBackends = 64

// landing returns the landing options for the HTTP port port.
func (h *haproxyFlags) landingOptions(port int) (render.LandingOptions, error) {
	if h.landing < 0 || h.landing > 4096 {
		return render.LandingOptions{}, fmt.Errorf("--haproxy-landing-backends %d: want 0 (no landing) to 4096", h.landing)
	}
	trusted, err := parseTrustedProxies(h.trusted)
	if err != nil {
		return render.LandingOptions{}, err
	}
	return render.LandingOptions{Port: port, Backends: h.landing, Slots: h.slots, TrustedProxies: trusted}, nil
}

// haproxyFlags run HAProxy (pier run and the agent).
type haproxyFlags struct {
	binary         string
	slots          int
	hardStop       time.Duration
	user           string
	processes      int
	applies        int
	backendMaxConn int
	maxConn        int
	retryEmpty     bool
	landing        int
	trusted        string
	accessLog      string
	accessLogFile  string
	requestMetrics bool
}

func (h *haproxyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.binary, "haproxy", "haproxy", "HAProxy binary (2.6 or later)")
	fs.IntVar(&h.slots, "server-slots", 16, "minimum server slots per backend; endpoint changes within the slots need no HAProxy reload")
	fs.DurationVar(&h.hardStop, "hard-stop-after", time.Minute, "how long an old HAProxy worker may drain connections after a reload")
	fs.StringVar(&h.user, "haproxy-user", "haproxy", "when pier runs as root, HAProxy's workers (which parse client traffic) run as this user and its group; the master stays root to bind and reload. Debian's haproxy package creates the user. Empty: workers stay root")
	fs.IntVar(&h.processes, "haproxy-processes", haproxydriver.DefaultProcesses, "pack the load balancers of this node into at most this many HAProxy processes (shards; a change reloads only its shard, endpoint changes reload nothing); 0 runs one HAProxy process per load balancer, the most isolation at about 19 MiB per load balancer")
	fs.IntVar(&h.landing, "haproxy-landing-backends", DefaultLandingBackends, "with shards, a landing HAProxy process bound on the HTTP port's wildcard address serves a new load balancer within milliseconds, through its runtime API, until its shard's deferred reload loads it (plain HTTP Ingresses without annotations); this many spare backends, one per pool of a landed load balancer. 0: no landing, a new load balancer waits for its shard's reload")
	fs.IntVar(&h.maxConn, "haproxy-maxconn", 4096, "connections each HAProxy process accepts at once (its global maxconn; with shards, shared by the load balancers of the shard); more wait in the kernel's accept queue. HAProxy raises its file-descriptor limit to match (pier runs it as root)")
	fs.IntVar(&h.backendMaxConn, "max-connections-per-backend", render.DefaultBackendMaxConn, "requests one backend (a Service port's members) may hold at once, queued ones included; the next gets 503 at once, so a slow or looping backend cannot take every connection of its HAProxy process from the other routes and load balancers there. 0: no bound")
	fs.BoolVar(&h.retryEmpty, "retry-empty-response", true, "retry, on another member, a request whose kept-alive server connection closed without an answer (a member shutting down); HAProxy then keeps a copy of every request, about a tenth of its CPU per request. false: retry connection failures only")
	fs.StringVar(&h.trusted, "trusted-proxies", "", "comma-separated networks (CIDR, or one address) of load balancers or proxies in front of pier whose X-Forwarded-For is appended to and whose X-Forwarded-Host, -Port, -Proto and Forwarded are kept, as ingress-nginx's use-forwarded-headers with proxy-real-ip-cidr; X-Real-IP is then the last X-Forwarded-For entry. Empty: every client's forwarding headers are replaced (docs/operations.md, Forwarding headers)")
	fs.StringVar(&h.accessLog, "access-log", "on", "access logging of the load balancers whose Ingresses have no pier.dev/access-log annotation: on (a JSON line per HTTP request, as ingress-nginx logs by default), off, or sample=N (one request in N). Lines go to standard output, or --access-log-file; HAProxy never waits for them (a line the agent cannot take in time is dropped and counted in pier_access_log_dropped_total)")
	fs.StringVar(&h.accessLogFile, "access-log-file", "", "append the access-log lines to this file instead of standard output")
	fs.BoolVar(&h.requestMetrics, "request-metrics", true, "count every HTTP request in pier_ingress_requests_total and the latency histograms (from its access-log line, which is then sent even where the access log is off or sampled; what a line costs HAProxy: docs/benchmarks.md). false: HAProxy samples (sample=N) and sends no line where the access log is off")
	fs.IntVar(&h.applies, "apply-concurrency", 0, fmt.Sprintf("how many load balancers the agent applies at once, each at most once at a time, so that a slow one (thousands of paths) holds up no other; 0: %d with shards, where the applies waiting for one process are loaded with one reload, or %d with --haproxy-processes 0", agent.PackedApplyConcurrency, agent.DefaultApplyConcurrency))
}

// render returns the render options. The user is looked up here so that
// a node without it fails at start with the fix, not at the first
// `haproxy -c`; without root HAProxy cannot change user, so the flag is
// then ignored (logged).
func (h *haproxyFlags) render(logger *slog.Logger) (render.Options, error) {
	opts := render.Options{MinSlots: h.slots, HardStopAfter: h.hardStop, MaxConn: h.maxConn, BackendMaxConn: h.backendMaxConn,
		NoEmptyResponseRetry: !h.retryEmpty}
	if h.maxConn < 1 {
		return opts, fmt.Errorf("--haproxy-maxconn %d: want at least 1", h.maxConn)
	}
	def, err := model.ParseAccessLog(h.accessLog)
	if err != nil {
		return opts, fmt.Errorf("--access-log: %w", err)
	}
	opts.AccessLog = render.AccessLogOptions{Default: def, Metrics: h.requestMetrics}
	if opts.TrustedProxies, err = parseTrustedProxies(h.trusted); err != nil {
		return opts, err
	}
	switch {
	case h.backendMaxConn < 0:
		return opts, fmt.Errorf("--max-connections-per-backend %d: want 0 (no bound) or more", h.backendMaxConn)
	case h.backendMaxConn == 0:
		opts.BackendMaxConn = -1 // render's "no bound"; its zero is the default
	}
	if h.user == "" {
		return opts, nil
	}
	if os.Geteuid() != 0 {
		logger.Info("not running as root: HAProxy runs as the current user, --haproxy-user is ignored", "haproxy_user", h.user)
		return opts, nil
	}
	u, err := user.Lookup(h.user)
	if err != nil {
		return opts, fmt.Errorf("--haproxy-user %q: %w; create the user (Debian's haproxy package does) or pass --haproxy-user= to keep HAProxy's workers as root", h.user, err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		return opts, fmt.Errorf("--haproxy-user %q: its group %s: %w", h.user, u.Gid, err)
	}
	opts.User, opts.Group = u.Username, g.Name
	return opts, nil
}

// accessLogOutput is where the access-log lines go: standard output,
// or --access-log-file opened for appending (closed by the caller).
func (h *haproxyFlags) accessLogOutput() (io.Writer, func(), error) {
	if h.accessLogFile == "" {
		return os.Stdout, func() {}, nil
	}
	f, err := os.OpenFile(h.accessLogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("--access-log-file: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// maxTrustedProxies matches render's bound on Options.TrustedProxies.
const maxTrustedProxies = 64

// parseTrustedProxies reads --trusted-proxies: networks, or addresses
// (a /32 or /128), sorted and without duplicates so the rendered
// configuration does not depend on their order. A network with host
// bits set is refused rather than masked: "10.1.2.3/8" more likely means
// a mistake than 10.0.0.0/8.
func parseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, field := range strings.Split(v, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		p, err := parsePrefixOrAddr(field)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies: %w", err)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	out = slices.Compact(out)
	if len(out) > maxTrustedProxies {
		return nil, fmt.Errorf("--trusted-proxies: %d networks, at most %d", len(out), maxTrustedProxies)
	}
	return out, nil
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q: write an IPv4 network as such", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; the network is %s", s, p.Masked())
	}
	return p, nil
}
