// Package metrics holds pier's Prometheus collectors, registered on one
// registry that /metrics serves. Names are documented in docs/operations.md.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is every collector pier updates.
type Metrics struct {
	Registry *prometheus.Registry

	LoadBalancers   prometheus.Gauge
	IngressProblems *prometheus.GaugeVec
	Rebuilds        *prometheus.CounterVec
	StatusPasses    *prometheus.CounterVec
	Snapshots       *prometheus.CounterVec
	RebuildSeconds  prometheus.Histogram
	Reloads         *prometheus.CounterVec
	RuntimeUpdates  *prometheus.CounterVec
	Landings        *prometheus.CounterVec
	ConfigRejected  prometheus.Counter
	FragmentChecks  *prometheus.CounterVec
	ApplySeconds    prometheus.Histogram
	HAProxyRestarts prometheus.Counter
	FDShortfall     prometheus.Gauge
	SourceProblems  prometheus.Gauge
	BGPSessionUp    *prometheus.GaugeVec
	BGPBFDUp        *prometheus.GaugeVec
	BGPRoutes       *prometheus.GaugeVec
	OrphansRemoved  prometheus.Counter

	// Per-request metrics, counted by the agent from each request's
	// access-log line (package accesslog).
	Requests         *prometheus.CounterVec
	RequestSeconds   *prometheus.HistogramVec
	UpstreamSeconds  *prometheus.HistogramVec
	ResponseBytes    *prometheus.CounterVec
	RequestBytes     *prometheus.CounterVec
	AccessLogLines   *prometheus.CounterVec
	AccessLogDropped prometheus.Counter
	MembersUp        *prometheus.GaugeVec
	Members          *prometheus.GaugeVec
}

// RequestLabels are the labels of the per-request metrics: the Service's
// namespace, the Ingress (or HTTPRoute) and the Service that answered;
// requests HAProxy answered itself (404, a redirect, a refusal) have no
// Service.
var RequestLabels = []string{"namespace", "ingress", "service"}

// requestBuckets are ingress-nginx's request duration buckets, so that
// dashboards and alerts carry over; HAProxy times in milliseconds.
var requestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// New registers every collector on a fresh registry: one list, a
// definition per metric, long because the metrics are many.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		LoadBalancers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pier_loadbalancers", Help: "Load balancers in the store.",
		}),
		IngressProblems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_ingress_problems", Help: "Problems found in Ingresses of our class, by severity.",
		}, []string{"severity"}),
		Rebuilds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_rebuilds_total",
			Help: "Translations of a new snapshot, by the first kind of change that mattered (initial, class, ingress, service, endpoints, secret, node).",
		}, []string{"reason"}),
		StatusPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_status_passes_total",
			Help: "Status decisions without a rebuild, by trigger: store (an agent report), source (an Ingress status or the status Service changed), rebuild (after each rebuild).",
		}, []string{"trigger"}),
		Snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_snapshots_total",
			Help: "Snapshots received from the source, by what they caused: rebuild, status (a status pass only) or none.",
		}, []string{"effect"}),
		RebuildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pier_rebuild_duration_seconds", Help: "Time to translate a snapshot and update the store.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_haproxy_reloads_total", Help: "HAProxy starts and reloads, by result.",
		}, []string{"result"}),
		RuntimeUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_haproxy_runtime_updates_total", Help: "Member changes applied through the runtime API without a reload, by result.",
		}, []string{"result"}),
		Landings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_haproxy_landings_total",
			Help: "New load balancers served by the landing process without a reload (landed), later loaded by their shard's deferred reload (folded), or whose landing failed and took the reload (failed).",
		}, []string{"result"}),
		ConfigRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pier_haproxy_config_rejected_total", Help: "Rendered configs that haproxy -c refused; the previous config kept serving.",
		}),
		FragmentChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_haproxy_fragment_checks_total",
			Help: "haproxy -c of one load balancer's fragment alone before it joins its shard's file list, by result (ok, refused, cancelled: its load balancer was deleted or its change superseded meanwhile), or skipped: a member change whose fragment differs from a checked one only in server addresses, weights and states.",
		}, []string{"result"}),
		ApplySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pier_apply_duration_seconds", Help: "Time for an agent to render, check and apply one load balancer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		HAProxyRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pier_haproxy_restarts_total", Help: "HAProxy instances restarted by the supervisor after they exited.",
		}),
		FDShortfall: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pier_haproxy_fd_shortfall",
			Help: "File descriptors the largest HAProxy process's config asks for beyond the RLIMIT_NOFILE it got (0: it fits); it serves within the limit, and connections beyond it wait or are refused.",
		}),
		SourceProblems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pier_source_problems", Help: "Manifest documents that could not be read (pier run).",
		}),
		BGPSessionUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_bgp_session_up", Help: "1 while the agent's BGP session with a peer is established (--bgp-peer).",
		}, []string{"peer"}),
		BGPBFDUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_bgp_bfd_up", Help: "1 while the agent's BFD session with a BGP peer is up (--bgp-bfd); absent without BFD.",
		}, []string{"peer"}),
		OrphansRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pier_orphan_addresses_removed_total",
			Help: "VIPs and floating IPs the agent removed from this node because no load balancer placed here has them any more (left by a keepalived or an agent that died while their load balancer was deleted or moved).",
		}),
		BGPRoutes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_bgp_routes_advertised", Help: "Host routes the agent advertises, preferred (active node) or not (standby).",
		}, []string{"preferred"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_ingress_requests_total",
			Help: "HTTP requests served, by namespace, Ingress (or HTTPRoute), Service and status class (1xx-5xx, or none when the client left before an answer); counted from every request's access-log line, so a line HAProxy dropped (pier_access_log_dropped_total) is a request not counted.",
		}, append(append([]string{}, RequestLabels...), "status")),
		RequestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pier_ingress_request_duration_seconds",
			Help:    "Time from the request's first byte to the end of the response (HAProxy's Ta, millisecond resolution), by namespace, Ingress and Service.",
			Buckets: requestBuckets,
		}, RequestLabels),
		UpstreamSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pier_ingress_upstream_response_duration_seconds",
			Help:    "Time the member took to send its response headers once the request was sent (HAProxy's Tr), by namespace, Ingress and Service; requests no member answered are not observed.",
			Buckets: requestBuckets,
		}, RequestLabels),
		ResponseBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_ingress_response_bytes_total", Help: "Bytes sent to clients, headers included, by namespace, Ingress and Service.",
		}, RequestLabels),
		RequestBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_ingress_request_bytes_total", Help: "Bytes received from clients, headers included, by namespace, Ingress and Service.",
		}, RequestLabels),
		AccessLogLines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pier_access_log_lines_total",
			Help: "Access-log lines the agent received, by what became of them: written, sampled (left out by sample=N), off (the load balancer logs nothing, the line only counted), unknown (a load balancer this agent does not run), malformed, overflow (dropped by the agent: more than 8,192 lines waiting).",
		}, []string{"result"}),
		AccessLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pier_access_log_dropped_total",
			Help: "Access-log lines HAProxy dropped because the agent's socket was full or gone (the sum of its processes' DroppedLogs, read every 10 s): the requests were served, not logged nor counted.",
		}),
		MembersUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_loadbalancer_members_up", Help: "Members (endpoints) of the load balancer's pools that HAProxy sees up, on this node, read every 10 s.",
		}, []string{"load_balancer"}),
		Members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_loadbalancer_members", Help: "Members (endpoints) of the load balancer's pools, on this node.",
		}, []string{"load_balancer"}),
	}
	m.Registry.MustRegister(m.Requests, m.RequestSeconds, m.UpstreamSeconds, m.ResponseBytes, m.RequestBytes,
		m.AccessLogLines, m.AccessLogDropped, m.MembersUp, m.Members)
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.LoadBalancers, m.IngressProblems, m.Rebuilds, m.StatusPasses, m.Snapshots, m.RebuildSeconds, m.Reloads, m.RuntimeUpdates, m.Landings, m.FragmentChecks,
		m.ConfigRejected, m.ApplySeconds, m.HAProxyRestarts, m.FDShortfall, m.SourceProblems, m.BGPSessionUp, m.BGPBFDUp, m.BGPRoutes, m.OrphansRemoved)
	return m
}
