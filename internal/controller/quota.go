package controller

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/model"
)

// Quota caps what one namespace may hold, so that a few tenants cannot
// exhaust the pools for the others (a few Ingresses or Gateways took
// every floating IP, and the next tenant was refused). Zero is no cap;
// pier's commands default each to a quarter of its pool. A load balancer
// belongs to the namespace of its first source (a shared group's
// owner). Caps apply when a load balancer is created: lowering one never
// takes an address from a load balancer that has it.
type Quota struct {
	LoadBalancers int // load balancers per namespace
	PublicIPs     int // floating IPs per namespace
}

// ErrQuotaExceeded marks a load balancer refused by a Quota.
var ErrQuotaExceeded = errors.New("namespace quota exceeded")

// usage counts, per namespace, load balancers and floating IPs.
type usage struct {
	lbs, fips map[string]int
}

func usageOf(lbs map[string]*model.LoadBalancer) usage {
	u := usage{lbs: map[string]int{}, fips: map[string]int{}}
	for _, lb := range lbs {
		u.add(lb)
	}
	return u
}

func ownerNamespace(lb *model.LoadBalancer) string {
	if len(lb.Sources) == 0 {
		return ""
	}
	return lb.Sources[0].Namespace
}

func (u usage) add(lb *model.LoadBalancer) {
	ns := ownerNamespace(lb)
	u.lbs[ns]++
	if lb.FIP != "" {
		u.fips[ns]++
	}
}

// admit says whether a new load balancer fits its namespace's quota;
// wantsFIP whether it would get a floating IP.
func (q Quota) admit(u usage, lb *model.LoadBalancer, wantsFIP bool) error {
	ns := ownerNamespace(lb)
	if q.LoadBalancers > 0 && u.lbs[ns] >= q.LoadBalancers {
		return fmt.Errorf("%w: namespace %s has %d load balancers, the most one namespace may hold (--max-load-balancers-per-namespace)", ErrQuotaExceeded, ns, u.lbs[ns])
	}
	if wantsFIP && q.PublicIPs > 0 && u.fips[ns] >= q.PublicIPs {
		return fmt.Errorf("%w: namespace %s has %d floating IPs, the most one namespace may hold of the public pool (--max-public-ips-per-namespace)", ErrQuotaExceeded, ns, u.fips[ns])
	}
	return nil
}
