package model

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// SpecHash hashes everything an agent applies (addresses, listeners, pools,
// members): two LoadBalancers with the same SpecHash render the same
// HAProxy configuration. Status, CreatedAt and Sources are left out.
func (lb *LoadBalancer) SpecHash() string {
	spec := struct {
		UUID      string
		Provider  Provider
		VIP, FIP  string
		Placement Placement
		Listeners []Listener
		Pools     []Pool
	}{lb.UUID, lb.Provider, lb.VIP, lb.FIP, lb.Placement, lb.Listeners, lb.Pools}
	b, err := json.Marshal(spec)
	if err != nil {
		// Marshal of plain structs of strings and ints cannot fail.
		panic("model: marshal spec: " + err.Error())
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Pool returns the pool with the given ID, or nil.
func (lb *LoadBalancer) Pool(id string) *Pool {
	for i := range lb.Pools {
		if lb.Pools[i].ID == id {
			return &lb.Pools[i]
		}
	}
	return nil
}

// Clone returns a deep copy, so callers can change it without touching a
// value that a store or cache still holds.
func (lb *LoadBalancer) Clone() *LoadBalancer {
	b, err := json.Marshal(lb)
	if err != nil {
		panic("model: marshal: " + err.Error())
	}
	var out LoadBalancer
	if err := json.Unmarshal(b, &out); err != nil {
		panic("model: unmarshal: " + err.Error())
	}
	return &out
}

// OldestFirst returns the load balancers with a UUID, oldest first
// (CreatedAt, then UUID): the order in which allocators replay what is
// stored, so that of two claims on one address or id the older wins.
func OldestFirst(lbs []*LoadBalancer) []*LoadBalancer {
	out := slices.DeleteFunc(slices.Clone(lbs), func(lb *LoadBalancer) bool {
		return lb == nil || lb.UUID == ""
	})
	slices.SortStableFunc(out, func(x, y *LoadBalancer) int {
		return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), cmp.Compare(x.UUID, y.UUID))
	})
	return out
}
