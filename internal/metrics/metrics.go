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
	SourceProblems  prometheus.Gauge
	BGPSessionUp    *prometheus.GaugeVec
	BGPRoutes       *prometheus.GaugeVec
}

// New registers every collector on a fresh registry.
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
		SourceProblems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pier_source_problems", Help: "Manifest documents that could not be read (pier run).",
		}),
		BGPSessionUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_bgp_session_up", Help: "1 while the agent's BGP session with a peer is established (--bgp-peer).",
		}, []string{"peer"}),
		BGPRoutes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pier_bgp_routes_advertised", Help: "Host routes the agent advertises, preferred (active node) or not (standby).",
		}, []string{"preferred"}),
	}
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.LoadBalancers, m.IngressProblems, m.Rebuilds, m.StatusPasses, m.Snapshots, m.RebuildSeconds, m.Reloads, m.RuntimeUpdates, m.Landings, m.FragmentChecks,
		m.ConfigRejected, m.ApplySeconds, m.HAProxyRestarts, m.SourceProblems, m.BGPSessionUp, m.BGPRoutes)
	return m
}
