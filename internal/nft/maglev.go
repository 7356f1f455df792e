package nft

import "strconv"

// MaglevSlots is the size of the lookup table of a Consistent service:
// a prime, so that every endpoint's permutation visits every slot, and
// large against the endpoint counts a Service has, so that each
// endpoint's share of the slots stays within a few percent of 1/N (Maglev
// aims at M much larger than N; 251 keeps a table of a few hundred
// elements per service in one nft transaction).
const MaglevSlots = 251

// maglev fills a lookup table of m slots from backends (sorted, as
// normalize leaves them), the way Maglev does (Eisenbud et al., NSDI
// 2016): each backend has a permutation of the slots drawn from two
// hashes of its address and port, and the backends take turns claiming
// the next free slot of their permutation. The table depends only on the
// set of backends, so every node computes the same one, and a backend
// that comes or goes moves few of the other backends' slots: a flow keeps
// its endpoint whichever node hashes it.
//
// Weights (weights.go): in round k a backend takes its turn only while
// it holds fewer than k times its weight over the largest weight, so the
// heaviest claims every round and the others in proportion (the way
// Envoy weights its Maglev table); with equal weights every backend
// claims every round, the table of the unweighted algorithm.
func maglev(backends []Backend, m int) []Backend {
	if len(backends) == 0 {
		return nil
	}
	offset := make([]int, len(backends))
	skip := make([]int, len(backends))
	for i, b := range backends {
		name := b.Addr.String() + ":" + strconv.Itoa(int(b.Port))
		offset[i] = int(hash64("offset", name) % uint64(m))
		skip[i] = int(hash64("skip", name)%uint64(m-1)) + 1
	}
	var heaviest int64
	for _, b := range backends {
		heaviest = max(heaviest, weightOf(b))
	}
	next := make([]int, len(backends))
	claimed := make([]int64, len(backends))
	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	filled := 0
	for round := int64(1); ; round++ {
		for i, b := range backends {
			if claimed[i]*heaviest >= round*weightOf(b) {
				continue
			}
			claimed[i]++
			c := (offset[i] + next[i]*skip[i]) % m
			for table[c] >= 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % m
			}
			table[c] = i
			next[i]++
			filled++
			if filled == m {
				out := make([]Backend, m)
				for j, k := range table {
					out[j] = backends[k]
				}
				return out
			}
		}
	}
}

// hash64 is FNV-1a of a seed and a name: fixed, so that the table is the
// same on every node and in every release.
func hash64(seed, name string) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range []byte(seed + "\x00" + name) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
