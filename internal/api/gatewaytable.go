package api

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// PrintGateways writes Gateways as kubectl prints them, with pier's load
// balancer: NAMESPACE NAME CLASS ADDRESSES PROGRAMMED LOADBALANCER AGE.
func PrintGateways(w io.Writer, gws []GatewayResponse, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tCLASS\tADDRESSES\tPROGRAMMED\tLOADBALANCER\tAGE")
	for _, g := range gws {
		var addrs []string
		for _, a := range g.Status.Addresses {
			addrs = append(addrs, a.Value)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Namespace, g.Name, g.Spec.GatewayClassName,
			dash(strings.Join(addrs, ",")), conditionStatus(g.Status.Conditions, string(gwv1.GatewayConditionProgrammed)),
			dash(g.LoadBalancer), age(now.Sub(g.CreationTimestamp.Time)))
	}
	return tw.Flush()
}

// PrintHTTPRoutes writes HTTPRoutes: NAMESPACE NAME HOSTNAMES PARENTS
// ACCEPTED AGE. ACCEPTED is per parent, in the order of PARENTS, with the
// reason when not True ("False/NotAllowedByListeners").
func PrintHTTPRoutes(w io.Writer, routes []HTTPRouteResponse, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tHOSTNAMES\tPARENTS\tACCEPTED\tAGE")
	for _, r := range routes {
		var hosts, parents, accepted []string
		for _, h := range r.Spec.Hostnames {
			hosts = append(hosts, string(h))
		}
		for _, p := range r.Status.Parents {
			parents = append(parents, parentName(p.ParentRef, r.Namespace))
			accepted = append(accepted, conditionStatus(p.Conditions, string(gwv1.RouteConditionAccepted)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Name, dash(strings.Join(hosts, ",")),
			dash(strings.Join(parents, ",")), dash(strings.Join(accepted, ",")), age(now.Sub(r.CreationTimestamp.Time)))
	}
	return tw.Flush()
}

// PrintRoutes writes routes of every kind as `pier get routes` shows
// them.
func PrintRoutes(w io.Writer, routes []RouteResponse, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tHOSTNAMES\tPARENTS\tACCEPTED\tPROBLEMS\tAGE")
	for _, r := range routes {
		var hosts, parents, accepted []string
		for _, h := range r.Hostnames {
			hosts = append(hosts, string(h))
		}
		for _, p := range r.Parents {
			parents = append(parents, parentName(p.ParentRef, r.Metadata.Namespace))
			accepted = append(accepted, conditionStatus(p.Conditions, string(gwv1.RouteConditionAccepted)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Kind, r.Metadata.Namespace, r.Metadata.Name,
			dash(strings.Join(hosts, ",")), dash(strings.Join(parents, ",")), dash(strings.Join(accepted, ",")), len(r.Problems),
			age(now.Sub(r.Metadata.CreationTimestamp.Time)))
	}
	return tw.Flush()
}

// parentName is a parentRef as ns/name[/section][:port].
func parentName(p gwv1.ParentReference, routeNS string) string {
	ns := routeNS
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	out := ns + "/" + string(p.Name)
	if p.SectionName != nil {
		out += "/" + string(*p.SectionName)
	}
	if p.Port != nil {
		out += fmt.Sprintf(":%d", *p.Port)
	}
	return out
}

// conditionStatus is "True", or "False/Reason", or "Unknown" when absent.
func conditionStatus(cs []metav1.Condition, typ string) string {
	for _, c := range cs {
		if c.Type != typ {
			continue
		}
		if c.Status == metav1.ConditionTrue {
			return string(c.Status)
		}
		return string(c.Status) + "/" + c.Reason
	}
	return "Unknown"
}
