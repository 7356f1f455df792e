// Package api serves pier's read-only HTTP API: load balancers, Ingresses
// with their status and problems, Gateways and HTTPRoutes with the status
// pier computes, health and metrics. It never changes anything; there is
// no write endpoint.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/store"
)

// Ingresses looks up the Ingresses pier knows.
type Ingresses interface {
	// Ingress returns the Ingress with status.loadBalancer filled as
	// published, and the problems found in it.
	Ingress(namespace, name string) (*networkingv1.Ingress, []model.Problem, bool)
}

// GatewayAPI lists the Gateways of pier's classes and the routes that
// name them, with the status pier computes (pipeline.Pipeline).
type GatewayAPI interface {
	// Gateways, HTTPRoutes and Routes return nil when they are not known
	// here (before the first snapshot), an empty list when there are none.
	Gateways() []pipeline.GatewayState
	HTTPRoutes() []pipeline.HTTPRouteState
	// Routes are the routes of every kind, HTTPRoutes included.
	Routes() []pipeline.RouteState
}

// Server is the HTTP API.
type Server struct {
	// Store is read, never written: a store.Mirror in a process that
	// has one (its reads cost no store round trip).
	Store     store.Reader
	Ingresses Ingresses
	// Gateways may be nil (an agent's API): the Gateway API endpoints
	// then answer 404.
	Gateways GatewayAPI
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// Healthy answers /healthz, the liveness probe: whether the process
	// still does its work (an error restarts it); nil means always.
	Healthy func() error
	// Ready answers /readyz, the readiness probe: whether this replica or
	// node can take its share of the work now (a rollout waits for it);
	// nil means the same as Healthy.
	Ready func() error
	// UI, when set, serves the web view at "/" (exact) and under "/ui/";
	// the API's own routes keep precedence.
	UI http.Handler
	// AllowedHosts are the host names (or addresses) a request's Host may
	// carry besides the listener's own address and, bound to loopback,
	// localhost (--api-allowed-hosts; see hostGuard).
	AllowedHosts []string
}

// IngressResponse is an Ingress (networking.k8s.io/v1) plus the problems
// pier found in it. Decoding it into a networkingv1.Ingress works: the
// extra field is ignored.
type IngressResponse struct {
	*networkingv1.Ingress `json:",inline"`
	Problems              []model.Problem `json:"problems"`
	// LoadBalancers are the load balancers that serve the Ingress, with
	// their state: one in ERROR does not serve the Ingress as written,
	// whatever its problems say.
	LoadBalancers []IngressLoadBalancer `json:"loadBalancers"`
}

// IngressLoadBalancer is the state of a load balancer serving an
// Ingress, as its agents report it (model.Status).
type IngressLoadBalancer struct {
	UUID  string      `json:"uuid"`
	Name  string      `json:"name"`
	State model.State `json:"state"`
	// Message says why the last apply failed, in full.
	Message string `json:"message,omitempty"`
	// Serving: the active node serves the current spec.
	Serving bool `json:"serving"`
	// RecentErrors are the recent 5xx kinds of the Ingress's routes
	// that the load balancer's nodes report, newest first (see
	// model.NodeStatus.RecentErrors).
	RecentErrors []model.RequestError `json:"recentErrors,omitempty"`
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /loadbalancers", s.listLoadBalancers)
	mux.HandleFunc("GET /loadbalancers/{uuid}", s.getLoadBalancer)
	mux.HandleFunc("GET /ingresses/{namespace}/{name}", s.getIngress)
	mux.HandleFunc("GET /gateways", s.listGateways)
	mux.HandleFunc("GET /gateways/{namespace}/{name}", s.getGateway)
	mux.HandleFunc("GET /httproutes", s.listHTTPRoutes)
	mux.HandleFunc("GET /httproutes/{namespace}/{name}", s.getHTTPRoute)
	mux.HandleFunc("GET /routes", s.listRoutes)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	if s.UI != nil { // the web view answers 405 to anything but GET and HEAD itself
		mux.Handle("/{$}", s.UI)
		mux.Handle("/ui/", s.UI)
	}
	return mux
}

// The API's connection limits. Clients are operators, scrapers and the
// web view's 2-second polls: none needs a connection for long, and the
// address may be reachable by more than them.
const (
	readTimeout  = 10 * time.Second
	writeTimeout = 30 * time.Second // a large load balancer's page included
	// idleTimeout closes keep-alive connections nobody uses.
	idleTimeout    = 60 * time.Second
	maxHeaderBytes = 64 << 10
	// maxConnections bounds open connections; more wait in the backlog.
	maxConnections = 256
)

// ListenAndServe serves until ctx ends, then shuts down within 5 s.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	names := s.AllowedHosts
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			// A name in --api-addr is one the operator uses for it.
			names = append(slices.Clip(names), host)
		}
	}
	return s.serve(ctx, netutil.LimitListener(ln, maxConnections), idleTimeout, names)
}

// Serve serves on ln until ctx ends; idle is the keep-alive idle timeout.
// Only requests whose Host names ln's address (or AllowedHosts) are
// answered (hostGuard).
func (s *Server) Serve(ctx context.Context, ln net.Listener, idle time.Duration) error {
	return s.serve(ctx, ln, idle, s.AllowedHosts)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, idle time.Duration, names []string) error {
	srv := &http.Server{Handler: newHostGuard(s.Handler(), ln.Addr(), names), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: readTimeout, WriteTimeout: writeTimeout, IdleTimeout: idle, MaxHeaderBytes: maxHeaderBytes}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

func (s *Server) listLoadBalancers(w http.ResponseWriter, r *http.Request) {
	lbs, err := s.Store.List(r.Context())
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	if lbs == nil {
		lbs = []*model.LoadBalancer{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": lbs})
}

func (s *Server) getLoadBalancer(w http.ResponseWriter, r *http.Request) {
	lb, err := s.Store.Get(r.Context(), r.PathValue("uuid"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.fail(w, http.StatusNotFound, err)
	case err != nil:
		s.fail(w, http.StatusInternalServerError, err)
	default:
		writeJSON(w, http.StatusOK, lb)
	}
}

func (s *Server) getIngress(w http.ResponseWriter, r *http.Request) {
	ing, problems, ok := s.Ingresses.Ingress(r.PathValue("namespace"), r.PathValue("name"))
	if !ok {
		s.fail(w, http.StatusNotFound, errors.New("ingress not found"))
		return
	}
	if problems == nil {
		problems = []model.Problem{}
	}
	lbs, err := store.ListBySource(r.Context(), s.Store, model.IngressRef(ing.Namespace, ing.Name))
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, IngressResponse{Ingress: ing, Problems: problems, LoadBalancers: servingIngress(lbs, ing)})
}

// servingIngress describes lbs, the load balancers serving ing
// (store.ListBySource found them), with their state.
func servingIngress(lbs []*model.LoadBalancer, ing *networkingv1.Ingress) []IngressLoadBalancer {
	out := make([]IngressLoadBalancer, 0, len(lbs))
	for _, lb := range lbs {
		state := lb.Status.State
		if state == "" {
			state = model.StatePending
		}
		out = append(out, IngressLoadBalancer{UUID: lb.UUID, Name: lb.Name, State: state, Message: lb.Status.Message, Serving: lb.Serving(),
			RecentErrors: errorsOf(lb, model.KindIngress, ing.Namespace, ing.Name)})
	}
	return out
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.probe(w, s.Healthy)
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	check := s.Ready
	if check == nil {
		check = s.Healthy
	}
	s.probe(w, check)
}

// probe answers a probe: 200 "ok", or 503 with the reason, which the
// kubelet records in the pod's events.
func (s *Server) probe(w http.ResponseWriter, check func() error) {
	if check != nil {
		if err := check(); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(err.Error() + "\n"))
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		s.Logger.Error("api request failed", "status", code, "error", err)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
