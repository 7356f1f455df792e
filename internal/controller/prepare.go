package controller

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/routerid"
	"pier.dev/pier/internal/scheduler"
	"pier.dev/pier/internal/source"
)

// clusterNodes is what prepare needs of the snapshot's nodes.
type clusterNodes struct {
	placeable scheduler.Nodes
	address   map[string]string // name → address; absent when unknown
}

// nodesOf keeps the ready nodes; a cordoned one among them is marked
// draining, so the scheduler leaves it its roles but gives it no new one.
func nodesOf(nodes []source.Node, ecmp bool) clusterNodes {
	c := clusterNodes{placeable: scheduler.Nodes{Draining: map[string]bool{}, NativeECMP: ecmp}, address: map[string]string{}}
	for _, n := range nodes {
		if n.Ready {
			c.placeable.Ready = append(c.placeable.Ready, n.Name)
			if n.Draining {
				c.placeable.Draining[n.Name] = true
			}
		}
		if n.Address.IsValid() {
			c.address[n.Name] = n.Address.String()
		}
	}
	sort.Strings(c.placeable.Ready)
	return c
}

// prepare carries over what the store knows (addresses, placement,
// creation time), then assigns addresses, nodes and the pair's VRRP
// router id. The scheduler stays pure: ids and node addresses are the
// controller's, filled in after it placed.
func (r *Reconciler) prepare(want, old *model.LoadBalancer, nodes clusterNodes, load func() scheduler.Load) (*model.LoadBalancer, error) {
	r.prepared++
	lb := want.Clone()
	if old != nil {
		lb.VIP, lb.FIP, lb.Placement = old.VIP, old.FIP, old.Placement
		if !old.CreatedAt.IsZero() {
			lb.CreatedAt = old.CreatedAt
		}
	}
	if err := r.IPAM.Assign(lb); err != nil {
		return nil, err
	}
	placement, err := scheduler.Place(lb, nodes.placeable, load)
	if err != nil {
		return nil, err
	}
	if placement.RouterID, err = r.RouterIDs.Assign(lb.UUID, lb.Name, placement); err != nil {
		return nil, err
	}
	placement.ActiveAddress = nodes.address[placement.Active]
	placement.StandbyAddress = nodes.address[placement.Standby]
	if placement.Active != lb.Placement.Active || placement.Standby != lb.Placement.Standby ||
		!slices.Equal(placement.ECMP, lb.Placement.ECMP) {
		load().Add(placement) // the maps of the one count: later placements see it
	}
	lb.Placement = placement
	return lb, nil
}

// oldestFirst orders load balancers by creation time (the stored one for
// existing objects, the oldest source's for new ones), then UUID.
func oldestFirst(lbs []*model.LoadBalancer, existing map[string]*model.LoadBalancer) []*model.LoadBalancer {
	created := func(lb *model.LoadBalancer) time.Time {
		if old := existing[lb.UUID]; old != nil && !old.CreatedAt.IsZero() {
			return old.CreatedAt
		}
		return lb.CreatedAt
	}
	out := append([]*model.LoadBalancer(nil), lbs...)
	sort.SliceStable(out, func(i, j int) bool {
		ci, cj := created(out[i]), created(out[j])
		if !ci.Equal(cj) {
			return ci.Before(cj)
		}
		return out[i].UUID < out[j].UUID
	})
	return out
}

func unchanged(old, lb *model.LoadBalancer) bool {
	return old.SpecHash() == lb.SpecHash() && old.Name == lb.Name &&
		old.RequestedFIP == lb.RequestedFIP && reflect.DeepEqual(old.Sources, lb.Sources)
}

func problemsForSources(lb *model.LoadBalancer, err error) []model.Problem {
	reason := "AddressUnavailable"
	switch {
	case errors.Is(err, ipam.ErrAddressInUse):
		reason = "ExternalIPInUse"
	case errors.Is(err, ipam.ErrOutsidePool):
		reason = "ExternalIPOutsidePool"
	case errors.Is(err, ipam.ErrPoolExhausted):
		reason = "AddressPoolExhausted"
	case errors.Is(err, scheduler.ErrUnsupportedProvider):
		reason = "UnsupportedProvider"
	case errors.Is(err, routerid.ErrExhausted):
		reason = "VRRPRouterIDsExhausted"
	case errors.Is(err, ErrQuotaExceeded):
		reason = "QuotaExceeded"
	}
	var out []model.Problem
	for _, src := range lb.Sources {
		reason := reason
		if src.Kind == model.KindGateway {
			reason = gatewayReason(err)
		}
		out = append(out, model.Problem{
			Kind: src.Kind, Namespace: src.Namespace, Name: src.Name,
			Severity: model.SeverityError, Reason: reason,
			Message: fmt.Sprintf("load balancer %s not updated: %v", lb.Name, err),
		})
	}
	return out
}

// gatewayReason is the Gateway API's reason for the Programmed condition
// of a Gateway whose load balancer could not get its addresses or nodes
// (the spec's GatewayConditionReason values), which the problem carries
// so that the status pass can set it (translate.GatewayStatus.NotProgrammed).
func gatewayReason(err error) string {
	switch {
	case errors.Is(err, ipam.ErrAddressInUse), errors.Is(err, ipam.ErrOutsidePool), errors.Is(err, ipam.ErrInvalidAddress):
		return "AddressNotUsable"
	case errors.Is(err, ipam.ErrPoolExhausted):
		return "AddressNotAssigned"
	}
	return "NoResources"
}
