package nft

import (
	"cmp"
	"errors"
	"slices"
)

// Weights. A service whose backends' weights differ (a UDPRoute of
// several backendRefs: each Service's weight shared out over its
// endpoints) keeps the even service's layout, a map from a slot number
// to an endpoint picked by numgen (or jhash) mod the slot count, with
// each endpoint holding as many slots as its weight asks: the rule, the
// element-by-element changes and the slots that linger one change work
// as for an even service, and no interval map is needed.
//
// The slot count is the weights' sum once divided by their greatest
// common divisor when that is at most WeightSlots (exact: 70 and 30 are
// 7 slots and 3), else WeightSlots shared out by the largest remainder
// (each endpoint's share is then off its weight's by less than
// 1/WeightSlots), and an endpoint rounded to no slot takes one from the
// endpoint holding the most, so that every endpoint given a weight gets
// some flows. A Consistent service keeps its Maglev table of MaglevSlots,
// each endpoint claiming slots in proportion to its weight (maglev.go).

// WeightSlots bounds the endpoint map of a weighted service whose exact
// table would be larger: 1,000 elements, each endpoint's share within
// 0.1 point of its weight's.
const WeightSlots = 1000

// MaxWeight bounds a backend's weight: a UDPRoute's 16 backendRefs weigh
// at most 1,000,000 each, which pier multiplies by at most 2^20 to share
// them exactly over the Services' endpoints, under 2^44 in all; the
// products apportion and maglev take stay far inside an int64.
const MaxWeight int64 = 1 << 44

// maxRejectOf bounds RejectOf: numgen and jhash take a 32-bit modulus.
const maxRejectOf = 1 << 30

// weightOf is b's weight, 0 counting as 1 (a Service's endpoints, which
// carry no weight, spread evenly).
func weightOf(b Backend) int64 {
	if b.Weight == 0 {
		return 1
	}
	return b.Weight
}

// isWeighted reports whether the backends' weights differ.
func isWeighted(bs []Backend) bool {
	for _, b := range bs {
		if weightOf(b) != weightOf(bs[0]) {
			return true
		}
	}
	return false
}

// checkWeights refuses what the renderer cannot serve as asked: a
// negative or huge weight, one endpoint listed with two weights (the
// caller adds an endpoint's shares up), a reject share outside 0-RejectOf.
func checkWeights(s Service) error {
	for i, b := range s.Backends {
		if b.Weight < 0 || b.Weight > MaxWeight {
			return errors.New("nft: backend weight outside 0-2^44")
		}
		if i > 0 && b.Addr == s.Backends[i-1].Addr && b.Port == s.Backends[i-1].Port {
			return errors.New("nft: one backend listed with two weights")
		}
	}
	if s.Reject == 0 {
		return nil
	}
	if s.Reject < 0 || s.RejectOf > maxRejectOf || s.Reject >= s.RejectOf {
		return errors.New("nft: reject share outside 1-2^30 and below its total")
	}
	return nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// apportion is the number of slots of each backend of a weighted
// service (see the comment at the top of this file).
func apportion(bs []Backend) []int {
	var g, total int64
	for _, b := range bs {
		g = gcd(g, weightOf(b))
		total += weightOf(b)
	}
	slots := make([]int, len(bs))
	if total/g <= WeightSlots {
		for i, b := range bs {
			slots[i] = int(weightOf(b) / g)
		}
		return slots
	}
	rem := make([]int64, len(bs))
	used := 0
	for i, b := range bs {
		q := WeightSlots * weightOf(b)
		slots[i], rem[i] = int(q/total), q%total
		used += slots[i]
	}
	order := make([]int, len(bs))
	for i := range order {
		order[i] = i
	}
	// Largest remainder first; ties to the first backend, so that the
	// table depends only on the set of backends.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	for k := 0; used < WeightSlots; k++ {
		slots[order[k]]++
		used++
	}
	for i := range slots {
		if slots[i] > 0 {
			continue
		}
		most := 0
		for j := range slots {
			if slots[j] > slots[most] {
				most = j
			}
		}
		if slots[most] > 1 {
			slots[most]--
			slots[i] = 1
		}
	}
	return slots
}

// weightedTable lays the slots out: each backend's run of slots in the
// backends' order.
func weightedTable(bs []Backend) []Backend {
	var out []Backend
	for i, n := range apportion(bs) {
		for range n {
			out = append(out, bs[i])
		}
	}
	return out
}

// slotTable is the endpoint of each slot of s's map: one per endpoint
// (entry i is endpoint i), the weighted table, or the Maglev table.
func slotTable(s Service) []Backend {
	switch {
	case len(s.Backends) == 0:
		return nil
	case s.Consistent:
		return maglev(s.Backends, MaglevSlots)
	case isWeighted(s.Backends):
		return weightedTable(s.Backends)
	}
	return s.Backends
}

// rejectShare is Reject of RejectOf in lowest terms, 0 and 0 for none.
func rejectShare(s Service) (int, int) {
	if s.Reject <= 0 {
		return 0, 0
	}
	g := gcd(s.Reject, s.RejectOf)
	return int(s.Reject / g), int(s.RejectOf / g)
}
