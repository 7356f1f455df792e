package nft

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Render returns the transaction that takes the table from prev (what
// runs, as the last Render returned it; nil: the table is absent or
// unknown) to next, and next as it runs afterwards (Slots filled in).
// With no service the table is deleted. The text depends only on the sets
// of services, not on their order.
//
// With prev nil the table is deleted and created whole. Otherwise the
// transaction changes only what differs, element by element: the base
// chains, and every element a packet may still look up, stay. A packet
// that starts through the old rules while the commit flips the
// generation looks its sets up in the new one; measured under 50
// endpoint changes, flushing and refilling the sets and chains made about
// 1 new connection in 10,000 miss its NAT (reset by the node). Hence the
// endpoint maps: entry i is endpoint i mod N; an entry changes in place
// (delete and add in one transaction) and entries past N stay until the
// transaction after the one that shrank N, when no rule can pick them.
func Render(prev, next []Service) ([]byte, []Service, error) {
	next = normalize(next)
	if err := checkUnique(next); err != nil {
		return nil, nil, err
	}
	for i := range next {
		if err := checkWeights(next[i]); err != nil {
			return nil, nil, fmt.Errorf("service %s: %w", next[i].ID, err)
		}
		next[i].Slots = slotCount(next[i])
	}
	var t text
	if len(next) == 0 || prev == nil {
		t.line(0, lit("add table inet pier_native"))
		t.line(0, lit("delete table inet pier_native"))
		if len(next) == 0 {
			return []byte(t.b.String()), next, nil
		}
		if err := create(&t, next); err != nil {
			return nil, nil, err
		}
		return []byte(t.b.String()), next, nil
	}
	if err := change(&t, normalize(prev), next); err != nil {
		return nil, nil, err
	}
	return []byte(t.b.String()), next, nil
}

// create declares the whole table.
func create(t *text, svcs []Service) error {
	e, err := elementsOf(svcs)
	if err != nil {
		return err
	}
	t.line(0, lit("table inet pier_native {"))
	declare(t, lit("map services {"), lit("type ipv4_addr . inet_proto . inet_service : verdict"), values(e.dispatch))
	declare(t, lit("set rejects {"), lit("type ipv4_addr . inet_proto . inet_service"), values(e.rejects))
	declare(t, lit("set addrs {"), lit("type ipv4_addr"), values(e.addrs))
	for _, s := range svcs {
		if len(s.Backends) == 0 {
			continue
		}
		n, err := names(s)
		if err != nil {
			return err
		}
		slots, err := slotWords(s, s.Slots)
		if err != nil {
			return err
		}
		declare(t, join(" ", lit("map"), n.eps, lit("{")), typeofEps(s), slots)
		rules, err := chainRules(s, n)
		if err != nil {
			return err
		}
		t.line(1, lit("chain"), n.chain, lit("{"))
		for _, r := range rules {
			t.line(2, r...)
		}
		t.line(1, lit("}"))
	}
	renderHooks(t)
	t.line(0, lit("}"))
	return nil
}

// change writes what differs between prev and next. Order matters in
// one transaction: new maps and chains are declared first, dispatch
// elements that go are deleted before their chains.
func change(t *text, prev, next []Service) error {
	before, after := byID(prev), byID(next)
	pe, err := elementsOf(prev)
	if err != nil {
		return err
	}
	ne, err := elementsOf(next)
	if err != nil {
		return err
	}
	var fresh, gone []Service // services whose chain and map appear, disappear
	for _, s := range next {
		if old, ok := before[s.ID]; len(s.Backends) > 0 && (!ok || len(old.Backends) == 0) {
			fresh = append(fresh, s)
		}
	}
	for _, s := range prev {
		if cur, ok := after[s.ID]; len(s.Backends) > 0 && (!ok || len(cur.Backends) == 0) {
			gone = append(gone, s)
		}
	}
	if len(fresh) > 0 {
		t.line(0, lit("table inet pier_native {"))
		for _, s := range fresh {
			n, err := names(s)
			if err != nil {
				return err
			}
			t.line(1, join(" ", lit("map"), n.eps, lit("{")), typeofEps(s), lit("; }"))
			t.line(1, lit("chain"), n.chain, lit("{ }"))
		}
		t.line(0, lit("}"))
	}
	diff(t, lit("services"), pe.dispatch, ne.dispatch)
	diff(t, lit("rejects"), pe.rejects, ne.rejects)
	diff(t, lit("addrs"), pe.addrs, ne.addrs)
	for i, s := range next {
		if len(s.Backends) == 0 {
			continue
		}
		old := before[s.ID]
		if slices.ContainsFunc(fresh, func(f Service) bool { return f.ID == s.ID }) {
			old = Service{}
		}
		slots, err := updateService(t, old, s)
		if err != nil {
			return fmt.Errorf("service %s: %w", s.ID, err)
		}
		next[i].Slots = slots
	}
	for _, s := range gone {
		n, err := names(s)
		if err != nil {
			return err
		}
		t.line(0, lit("delete chain inet pier_native"), n.chain)
		t.line(0, lit("delete map inet pier_native"), n.eps)
	}
	return nil
}

// updateService rewrites the endpoint map of s entry by entry and its
// rule when the rule changes, and returns how many entries the map holds.
// old is the zero Service when s's map is new.
func updateService(t *text, old, s Service) (int, error) {
	n, err := names(s)
	if err != nil {
		return 0, err
	}
	keep := max(slotCount(old), slotCount(s))
	have, err := slotWords(old, old.Slots)
	if err != nil {
		return 0, err
	}
	want, err := slotWords(s, keep)
	if err != nil {
		return 0, err
	}
	var del, add []word
	for i := range max(len(have), len(want)) {
		switch {
		case i >= len(want):
			del = append(del, num(i))
		case i >= len(have):
			add = append(add, want[i])
		case have[i] != want[i]:
			del, add = append(del, num(i)), append(add, want[i])
		}
	}
	elements(t, lit("delete element inet pier_native"), n.eps, del)
	elements(t, lit("add element inet pier_native"), n.eps, add)
	oldRules, _ := chainRules(old, n)
	rules, err := chainRules(s, n)
	if err != nil {
		return 0, err
	}
	if !slices.EqualFunc(oldRules, rules, slices.Equal) {
		t.line(0, lit("flush chain inet pier_native"), n.chain)
		for _, r := range rules {
			t.line(0, append([]word{lit("add rule inet pier_native"), n.chain}, r...)...)
		}
	}
	return keep, nil
}

// diff deletes the elements of set that go or change, and adds those
// that come or change.
func diff(t *text, set word, before, after map[string]word) {
	var del, add []word
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if w, ok := after[k]; !ok || w != before[k] {
			del = append(del, keyWord(k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if w, ok := before[k]; !ok || w != after[k] {
			add = append(add, after[k])
		}
	}
	elements(t, lit("delete element inet pier_native"), set, del)
	elements(t, lit("add element inet pier_native"), set, add)
}

// elements writes one element statement, when there is an element.
func elements(t *text, verb, set word, elems []word) {
	if len(elems) == 0 {
		return
	}
	words := []word{verb, set, lit("{")}
	for i, e := range elems {
		if i < len(elems)-1 {
			e = join("", e, lit(","))
		}
		words = append(words, e)
	}
	t.line(0, append(words, lit("}"))...)
}

// elementSets are the elements of the three shared sets, keyed by the
// text of their key.
type elementSets struct {
	dispatch, rejects, addrs map[string]word
}

func elementsOf(svcs []Service) (elementSets, error) {
	e := elementSets{dispatch: map[string]word{}, rejects: map[string]word{}, addrs: map[string]word{}}
	for _, s := range svcs {
		n, err := names(s)
		if err != nil {
			return e, err
		}
		p, err := s.Proto.word()
		if err != nil {
			return e, err
		}
		pt, err := port(s.Port)
		if err != nil {
			return e, err
		}
		for _, a := range s.Addrs {
			aw, err := addr4(a)
			if err != nil {
				return e, fmt.Errorf("service %s: %w", s.ID, err)
			}
			k := join(" . ", aw, p, pt)
			if len(s.Backends) == 0 {
				e.rejects[k.s] = k
			} else {
				e.dispatch[k.s] = join(" : ", k, join(" ", lit("goto"), n.chain))
			}
			e.addrs[aw.s] = aw
		}
	}
	return e, nil
}

func values(m map[string]word) []word {
	var out []word
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// serviceNames are the chain and endpoint map of a service.
type serviceNames struct{ chain, eps word }

func names(s Service) (serviceNames, error) {
	chain, err := ident("svc_" + s.ID)
	if err != nil {
		return serviceNames{}, err
	}
	eps, err := ident("eps_" + s.ID)
	return serviceNames{chain: chain, eps: eps}, err
}

// slotCount is how many entries the rule of s picks among: one per
// endpoint, the weighted table's, or the Maglev table's.
func slotCount(s Service) int {
	if s.Consistent && len(s.Backends) > 0 {
		return MaglevSlots
	}
	return len(slotTable(s))
}

// slotWords are the first n entries of s's endpoint map: entry i is slot
// i mod N of its table (slotTable: backend i, the weighted table, or the
// Maglev table when s is Consistent).
func slotWords(s Service, n int) ([]word, error) {
	table := slotTable(s)
	if len(table) == 0 {
		return nil, nil
	}
	out := make([]word, 0, n)
	for i := range n {
		b := table[i%len(table)]
		aw, err := addr4(b.Addr)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		pw, err := port(b.Port)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		out = append(out, join(" : ", num(i), join(" . ", aw, pw)))
	}
	return out, nil
}

// typeofEps types an endpoint map: a numgen index to an address and port.
func typeofEps(s Service) word {
	if s.Proto == UDP {
		return lit("typeof numgen random mod 1 : ip daddr . udp dport")
	}
	return lit("typeof numgen random mod 1 : ip daddr . tcp dport")
}

// chainRules are the rules of a service chain: with a reject share, a
// rule refusing R of every T new flows; then DNAT to the endpoint picked
// among the first N entries of its map.
func chainRules(s Service, n serviceNames) ([][]word, error) {
	if len(s.Backends) == 0 {
		return nil, errors.New("nft: no backend")
	}
	p, err := s.Proto.word()
	if err != nil {
		return nil, err
	}
	pick := lit("numgen random mod")
	switch {
	case s.Consistent:
		// The flow's addresses and ports: a node that never saw the
		// flow's first packet picks what the first node picked.
		pick = join(" ", lit("jhash ip saddr ."), p, lit("sport . ip daddr ."), p, lit("dport mod"))
	case s.SourceHash:
		pick = lit("jhash ip saddr mod")
	}
	hashed := s.SourceHash || s.Consistent
	var rules [][]word
	if r, total := rejectShare(s); r > 0 {
		// A refused datagram leaves no conntrack entry: with numgen the
		// client's next one is drawn again, with jhash it is refused
		// again (the share is per client or per flow). Its own seed:
		// both rules scale the hash's high bits to their modulus, so
		// with one seed the flows left after the refusal would all
		// hash to the high slots of the endpoint map.
		rule := []word{lit("meta l4proto"), p, pick, num(total)}
		if hashed {
			rule = append(rule, lit("seed 0x5050"))
		}
		rules = append(rules, append(rule, lit("<"), num(r), lit("goto no_endpoints")))
	}
	rule := []word{lit("meta l4proto"), p, lit("dnat ip to"), pick, num(slotCount(s))}
	if hashed {
		// A fixed seed: a client keeps its endpoint across transactions.
		rule = append(rule, lit("seed 0x5049"))
	}
	return append(rules, append(rule, lit("map"), join("", lit("@"), n.eps))), nil
}

func byID(svcs []Service) map[string]Service {
	out := map[string]Service{}
	for _, s := range svcs {
		out[s.ID] = s
	}
	return out
}

// declare writes a named set or map with one element a line.
func declare(t *text, head, typ word, elems []word) {
	t.line(1, head)
	t.line(2, typ)
	if len(elems) > 0 {
		t.line(2, lit("elements = {"))
		for i, e := range elems {
			if i < len(elems)-1 {
				e = join("", e, lit(","))
			}
			t.line(3, e)
		}
		t.line(2, lit("}"))
	}
	t.line(1, lit("}"))
}
