package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"pier.dev/pier/internal/model"
)

// ListLoadBalancers fetches GET /loadbalancers from a running pier.
func ListLoadBalancers(ctx context.Context, addr string) ([]*model.LoadBalancer, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := "http://" + addr + "/loadbalancers"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is pier running with --api-addr %s? %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	var list struct {
		Items []*model.LoadBalancer `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode %s: %w", url, err)
	}
	return list.Items, nil
}

// PrintTable writes load balancers as kubectl-style columns.
func PrintTable(w io.Writer, lbs []*model.LoadBalancer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPROVIDER\tVIP\tFIP\tSTATE\tACTIVE\tSTANDBY\tAGE")
	for _, lb := range lbs {
		state := string(lb.Status.State)
		if state == "" {
			state = string(model.StatePending)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", lb.Name, lb.Provider, dash(lb.VIP), dash(lb.FIP),
			state, withRole(lb, lb.Placement.Active), withRole(lb, lb.Placement.Standby), age(now.Sub(lb.CreatedAt)))
	}
	return tw.Flush()
}

// withRole is a placed node with the VRRP role its agent reports, if any:
// "n0 (MASTER)". After a failover the standby is the MASTER.
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
