package api

import (
	"errors"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
)

// GatewayResponse is a Gateway (gateway.networking.k8s.io/v1) with the
// status pier computes, the UUID of the load balancer it became ("" when
// refused) and the problems pier found in it. It decodes into a
// gwv1.Gateway too: the extra fields are ignored.
type GatewayResponse struct {
	*gwv1.Gateway `json:",inline"`
	LoadBalancer  string          `json:"loadBalancer"`
	Problems      []model.Problem `json:"problems"`
}

// HTTPRouteResponse is an HTTPRoute with pier's status.parents entries as
// computed (other controllers' as the object has them) and its problems.
type HTTPRouteResponse struct {
	*gwv1.HTTPRoute `json:",inline"`
	Problems        []model.Problem `json:"problems"`
}

// RouteResponse is one route of any kind in GET /routes: enough to see
// what pier made of it (its parents' conditions and its problems), not
// its spec, whose shape differs by kind (GET /httproutes has the whole
// HTTPRoute).
type RouteResponse struct {
	Kind       string            `json:"kind"`
	APIVersion string            `json:"apiVersion"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	// Hostnames are the spec's (HTTPRoute, GRPCRoute, TLSRoute).
	Hostnames []gwv1.Hostname          `json:"hostnames,omitempty"`
	Parents   []gwv1.RouteParentStatus `json:"parents"`
	Problems  []model.Problem          `json:"problems"`
}

var errGatewaysUnknown = errors.New("the Gateway API is not known here")

func gatewayResponse(g pipeline.GatewayState) GatewayResponse {
	return GatewayResponse{Gateway: g.Gateway, LoadBalancer: g.LoadBalancer, Problems: nonNil(g.Problems)}
}

func routeResponse(r pipeline.HTTPRouteState) HTTPRouteResponse {
	return HTTPRouteResponse{HTTPRoute: r.Route, Problems: nonNil(r.Problems)}
}

func nonNil(ps []model.Problem) []model.Problem {
	if ps == nil {
		return []model.Problem{}
	}
	return ps
}

func (s *Server) gatewayStates(w http.ResponseWriter) ([]pipeline.GatewayState, bool) {
	var gws []pipeline.GatewayState
	if s.Gateways != nil {
		gws = s.Gateways.Gateways()
	}
	if gws == nil {
		s.fail(w, http.StatusNotFound, errGatewaysUnknown)
		return nil, false
	}
	return gws, true
}

func (s *Server) routeStates(w http.ResponseWriter) ([]pipeline.HTTPRouteState, bool) {
	var routes []pipeline.HTTPRouteState
	if s.Gateways != nil {
		routes = s.Gateways.HTTPRoutes()
	}
	if routes == nil {
		s.fail(w, http.StatusNotFound, errGatewaysUnknown)
		return nil, false
	}
	return routes, true
}

func (s *Server) listGateways(w http.ResponseWriter, _ *http.Request) {
	gws, ok := s.gatewayStates(w)
	if !ok {
		return
	}
	items := make([]GatewayResponse, 0, len(gws))
	for _, g := range gws {
		items = append(items, gatewayResponse(g))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) getGateway(w http.ResponseWriter, r *http.Request) {
	gws, ok := s.gatewayStates(w)
	if !ok {
		return
	}
	for _, g := range gws {
		if g.Gateway.Namespace == r.PathValue("namespace") && g.Gateway.Name == r.PathValue("name") {
			writeJSON(w, http.StatusOK, gatewayResponse(g))
			return
		}
	}
	s.fail(w, http.StatusNotFound, errors.New("gateway not found"))
}

func (s *Server) listHTTPRoutes(w http.ResponseWriter, _ *http.Request) {
	routes, ok := s.routeStates(w)
	if !ok {
		return
	}
	items := make([]HTTPRouteResponse, 0, len(routes))
	for _, rt := range routes {
		items = append(items, routeResponse(rt))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) listRoutes(w http.ResponseWriter, _ *http.Request) {
	var routes []pipeline.RouteState
	if s.Gateways != nil {
		routes = s.Gateways.Routes()
	}
	if routes == nil {
		s.fail(w, http.StatusNotFound, errGatewaysUnknown)
		return
	}
	items := make([]RouteResponse, 0, len(routes))
	for _, rt := range routes {
		parents := rt.Parents
		if parents == nil {
			parents = []gwv1.RouteParentStatus{}
		}
		items = append(items, RouteResponse{Kind: rt.Kind, APIVersion: gwv1.GroupVersion.String(), Metadata: rt.Meta,
			Hostnames: rt.Hostnames, Parents: parents, Problems: nonNil(rt.Problems)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) getHTTPRoute(w http.ResponseWriter, r *http.Request) {
	routes, ok := s.routeStates(w)
	if !ok {
		return
	}
	for _, rt := range routes {
		if rt.Route.Namespace == r.PathValue("namespace") && rt.Route.Name == r.PathValue("name") {
			writeJSON(w, http.StatusOK, routeResponse(rt))
			return
		}
	}
	s.fail(w, http.StatusNotFound, errors.New("httproute not found"))
}
