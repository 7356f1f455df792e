package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"pier.dev/pier/internal/model"
)

// ListLoadBalancers fetches GET /loadbalancers from a running pier.
func ListLoadBalancers(ctx context.Context, addr string) ([]*model.LoadBalancer, error) {
	var list struct {
		Items []*model.LoadBalancer `json:"items"`
	}
	err := getJSON(ctx, addr, "/loadbalancers", &list)
	return list.Items, err
}

// ListGateways fetches GET /gateways from a running pier.
func ListGateways(ctx context.Context, addr string) ([]GatewayResponse, error) {
	var list struct {
		Items []GatewayResponse `json:"items"`
	}
	err := getJSON(ctx, addr, "/gateways", &list)
	return list.Items, err
}

// ListHTTPRoutes fetches GET /httproutes from a running pier.
func ListHTTPRoutes(ctx context.Context, addr string) ([]HTTPRouteResponse, error) {
	var list struct {
		Items []HTTPRouteResponse `json:"items"`
	}
	err := getJSON(ctx, addr, "/httproutes", &list)
	return list.Items, err
}

// ListRoutes fetches GET /routes from a running pier.
func ListRoutes(ctx context.Context, addr string) ([]RouteResponse, error) {
	var list struct {
		Items []RouteResponse `json:"items"`
	}
	err := getJSON(ctx, addr, "/routes", &list)
	return list.Items, err
}

// getJSON decodes GET path of a running pier's API into v.
func getJSON(ctx context.Context, addr, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := "http://" + addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("is pier running with --api-addr %s? %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", url, err)
	}
	return nil
}

// PrintTable writes load balancers as kubectl-style columns.
func PrintTable(w io.Writer, lbs []*model.LoadBalancer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPROVIDER\tSOURCE\tVIP\tFIP\tSTATE\tACTIVE\tSTANDBY\tMEMBERS\tREQ/S\t5XX\tLAST-5XX\tAGE")
	for _, lb := range lbs {
		state := string(lb.Status.State)
		if state == "" {
			state = string(model.StatePending)
		}
		t := traffic(lb, now)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", lb.Name, lb.Provider, sourceOf(lb), dash(lb.VIP), dash(lb.FIP),
			state, withRole(lb, lb.Placement.Active), standbyCell(lb), t.members, t.rate, t.errors, t.last, age(now.Sub(lb.CreatedAt)))
	}
	return tw.Flush()
}

// trafficCells are the MEMBERS, REQ/S, 5XX and LAST-5XX cells.
type trafficCells struct{ members, rate, errors, last string }

// traffic is what the node serving lb (the holder, else the active node)
// reports: members up of members, as its HAProxy's health checks see
// them ("2/3"), requests per second and the 5xx share over its agent's
// last rate window, and its newest 5xx ("502 3m": pier get errors lists
// them); "-" for what it has not reported, and the rates of a native
// load balancer (no HAProxy counts its requests).
func traffic(lb *model.LoadBalancer, now time.Time) trafficCells {
	node := lb.Status.Holder
	if node == "" {
		node = lb.Placement.Active
	}
	r, ok := lb.Status.Report(node)
	if !ok {
		return trafficCells{"-", "-", "-", "-"}
	}
	members := fmt.Sprintf("%d/%d", r.MembersUp, r.Members)
	if lb.Provider != model.ProviderHAProxy {
		return trafficCells{members, "-", "-", "-"}
	}
	return trafficCells{members, strconv.FormatFloat(r.RequestsPerSecond, 'f', -1, 64),
		strconv.FormatFloat(math.Round(r.ErrorShare*1e4)/100, 'f', -1, 64) + "%", lastError(r, now)}
}

// sourceOf names what a load balancer serves, kind first:
// "Gateway/ns/name"; several Ingresses sharing one are "Ingress/ns/a +2".
func sourceOf(lb *model.LoadBalancer) string {
	if len(lb.Sources) == 0 {
		return "-"
	}
	s := lb.Sources[0]
	out := s.Kind + "/" + s.Key()
	if n := len(lb.Sources) - 1; n > 0 {
		out += fmt.Sprintf(" +%d", n)
	}
	return out
}

// withRole is a placed node with the VRRP role its agent reports, if any:
// "n0 (MASTER)". After a failover the standby is the MASTER.
// standbyCell is the standby node, or with ECMP every other node that
// serves at once (ECMP).
func standbyCell(lb *model.LoadBalancer) string {
	if len(lb.Placement.ECMP) == 0 {
		return withRole(lb, lb.Placement.Standby)
	}
	var others []string
	for _, n := range lb.Placement.ECMP {
		if n != lb.Placement.Active {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return "-"
	}
	return strings.Join(others, ",") + " (ecmp)"
}

func withRole(lb *model.LoadBalancer, node string) string {
	if node == "" {
		return "-"
	}
	if r, ok := lb.Status.Report(node); ok && r.VRRP != "" {
		return node + " (" + string(r.VRRP) + ")"
	}
	return node
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age formats like kubectl: 45s, 12m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
