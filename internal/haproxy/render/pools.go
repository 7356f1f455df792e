package render

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// maxSlots bounds one backend, so one Service cannot grow the file
// without end: 4096 servers is already far more
// than one Service's ready endpoints in practice.
const maxSlots = 4096

func poolViews(pools []model.Pool, minSlots int, prev Slots) ([]poolView, error) {
	out := make([]poolView, 0, len(pools))
	for i := range pools {
		pv, err := poolOf(&pools[i], minSlots, prev[pools[i].ID])
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", encode.Printable(pools[i].ID), err)
		}
		out = append(out, pv)
	}
	slices.SortFunc(out, func(a, b poolView) int { return cmp.Compare(a.id, b.id) })
	for i := 1; i < len(out); i++ {
		if out[i].id == out[i-1].id {
			return nil, fmt.Errorf("duplicate pool id %s", encode.Printable(out[i].id))
		}
	}
	return out, nil
}

// maxFailTotal bounds a pool's FailTotal: HTTPRoute weights are at most
// 1,000,000 each, and rand() takes a 32-bit range.
const maxFailTotal = 1 << 30

// maxTries bounds a pool's tries as translation does.
const maxTries = 11

// algorithms maps the model's (Octavia's) names to balance words.
var algorithms = map[model.Algorithm]encode.Word{
	"":                              encode.Lit("roundrobin"),
	model.AlgorithmRoundRobin:       encode.Lit("roundrobin"),
	model.AlgorithmLeastConnections: encode.Lit("leastconn"),
	model.AlgorithmSourceIP:         encode.Lit("source"),
}

func poolOf(p *model.Pool, minSlots int, prev []netip.AddrPort) (poolView, error) {
	pv := poolView{id: p.ID, check: p.HealthCheck, connect: p.ConnectTimeout, server: p.ServerTimeout, deadline: p.Deadline}
	if err := encode.ID("be_", p.ID).Err(); err != nil {
		return pv, err
	}
	if err := checkPoolTimeouts(p); err != nil {
		return pv, err
	}
	cookie, err := cookieOf(p.Affinity)
	if err != nil {
		return pv, fmt.Errorf("affinity: %w", err)
	}
	pv.cookie = cookie
	if pv.protocol, err = protocolOf(p.Protocol); err != nil {
		return pv, err
	}
	pv.proto = p.Protocol
	pv.tcp = p.TCP
	// A TCP pool may speak TLS to its members (a TLSRoute whose listener
	// terminates, under a BackendTLSPolicy: the decrypted stream is
	// encrypted again towards the member), which is HTTPS with upstream
	// TLS; nothing else of HTTP applies to it.
	tcpTLS := p.Protocol == model.BackendHTTPS && p.UpstreamTLS != nil
	if p.TCP && (p.Affinity != nil || (p.Protocol != "" && !tcpTLS) || (p.UpstreamTLS != nil && !tcpTLS) || p.Tries != 0 ||
		len(p.RetryStatuses) > 0 || p.RetryTimeout || p.Deadline != 0) {
		return pv, errors.New("a TCP pool has no affinity, protocol but TLS to its members, tries, retry-on or deadline")
	}
	if p.UpstreamTLS != nil {
		pv.upstream = *p.UpstreamTLS
	}
	if p.Tries < 0 || p.Tries > maxTries {
		return pv, fmt.Errorf("tries %d is outside 0-%d", p.Tries, maxTries)
	}
	pv.tries = p.Tries
	if pv.retryOn, err = retryOnOf(p); err != nil {
		return pv, err
	}
	if p.FailWeight != 0 || p.FailTotal != 0 {
		if p.FailWeight < 1 || p.FailTotal <= p.FailWeight || p.FailTotal > maxFailTotal {
			return pv, fmt.Errorf("fail weight %d of %d: needs 0 < weight < total <= %d", p.FailWeight, p.FailTotal, maxFailTotal)
		}
		pv.fail, pv.failTotal = p.FailWeight, p.FailTotal
	}
	if pv.reqHeaders, err = headerOpsOf("pool request headers", p.RequestHeaders); err != nil {
		return pv, err
	}
	if p.TCP && len(pv.reqHeaders) > 0 {
		return pv, errors.New("a TCP pool has no request headers to change")
	}
	if pv.rewrite, err = poolRewriteOf(p); err != nil {
		return pv, err
	}
	if p.TCP && pv.rewrite != nil {
		return pv, errors.New("a TCP pool has no path to rewrite")
	}
	balance, ok := algorithms[p.Algorithm]
	if !ok {
		return pv, fmt.Errorf("unknown algorithm %s", encode.Printable(string(p.Algorithm)))
	}
	pv.balance = balance
	if pv.slots, err = poolSlots(p.Members, minSlots, prev); err != nil {
		return pv, err
	}
	return pv, nil
}

// poolSlots lays a pool's members out in its server slots: at least
// minSlots of them, each member in the slot it had in prev.
func poolSlots(ms []model.Member, minSlots int, prev []netip.AddrPort) ([]slot, error) {
	members := make([]slot, 0, len(ms))
	for _, m := range ms {
		s, err := memberSlot(m)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", encode.Printable(m.Address), err)
		}
		members = append(members, s)
	}
	n := slotCount(len(members), minSlots)
	if n > maxSlots {
		return nil, fmt.Errorf("%d members, the limit is %d", len(members), maxSlots)
	}
	// Sorted first, so the input order of members never matters; then
	// each keeps the slot it had (assignSlots), so a member joining moves
	// no serving slot to another endpoint.
	slices.SortFunc(members, func(a, b slot) int {
		return cmp.Or(a.addr.Compare(b.addr), cmp.Compare(a.port, b.port), cmp.Compare(a.weight, b.weight))
	})
	return assignSlots(members, n, prev), nil
}

// memberSlot validates a member. Weight 0 means "not set" and becomes 1:
// the model has no draining flag, and a zero weight from a translation
// that forgot it would silently black-hole the pool.
func memberSlot(m model.Member) (slot, error) {
	a, err := encode.IP(m.Address)
	if err != nil {
		return slot{}, err
	}
	port, err := encode.Port(m.Port)
	if err != nil {
		return slot{}, err
	}
	w := m.Weight
	if w == 0 {
		w = 1
	}
	if w < 0 || w > 256 {
		return slot{}, fmt.Errorf("weight %d is outside 1-256", m.Weight)
	}
	return slot{used: true, addr: a, port: port, weight: w}, nil
}

// slotCount is max(minSlots, the next power of two >= members): powers of
// two keep the count stable while a pool grows and shrinks a little.
func slotCount(members, minSlots int) int {
	n := 1
	if members > 1 {
		n = 1 << bits.Len(uint(members-1))
	}
	return max(n, minSlots)
}

// backendName is be_<lb uuid>_<pool id>: scoped to the load balancer, so
// two load balancers using one Service load into one process. The uuid
// has a fixed shape, so the name splits back unambiguously.
func backendName(uuid, poolID string) encode.Word {
	return encode.Concat(encode.ID("be_", uuid), encode.Lit("_"), encode.ID("", poolID))
}

// frontendName is fe_<lb uuid>_<port>.
func frontendName(uuid string, port int) encode.Word {
	return encode.Concat(encode.ID("fe_", uuid), encode.Lit("_"), encode.Num(port))
}

// notFoundName answers requests that match no policy on a listener
// without a default pool. It has no "be_" prefix, so no pool can take it.
func notFoundName(uuid string) encode.Word { return encode.ID("pier_404_", uuid) }

// serverName is s<i>, 1-based like HAProxy's own numbering.
func serverName(i int) encode.Word { return encode.Concat(encode.Lit("s"), encode.Num(i+1)) }

// retryStatuses are the status codes HAProxy 2.6's retry-on accepts.
var retryStatuses = map[int]bool{401: true, 403: true, 404: true, 408: true, 425: true,
	500: true, 501: true, 502: true, 503: true, 504: true}

// retryOnOf is a pool's retry-on words: connection failures and empty
// responses as in the defaults, then a response timeout and the status
// codes it names, ascending and once each; nil keeps the defaults'.
func retryOnOf(p *model.Pool) ([]encode.Word, error) {
	if len(p.RetryStatuses) == 0 && !p.RetryTimeout {
		return nil, nil
	}
	if len(p.RetryStatuses) > len(retryStatuses) {
		return nil, fmt.Errorf("%d retry statuses, at most %d", len(p.RetryStatuses), len(retryStatuses))
	}
	words := []encode.Word{encode.Lit("conn-failure"), encode.Lit("empty-response")}
	if p.RetryTimeout {
		words = append(words, encode.Lit("response-timeout"))
	}
	codes := slices.Clone(p.RetryStatuses)
	slices.Sort(codes)
	for _, c := range slices.Compact(codes) {
		if !retryStatuses[c] {
			return nil, fmt.Errorf("retry status %d is not one HAProxy retries on (401, 403, 404, 408, 425, 500-504)", c)
		}
		words = append(words, encode.Num(c))
	}
	return words, nil
}

// poolRewriteOf validates a pool's path rewrite again: a plain full path
// for set-path, or a prefix replacement for replace-path (the words
// encode.PrefixReplace makes, as for a policy's).
func poolRewriteOf(p *model.Pool) ([]encode.Word, error) {
	switch {
	case p.RewritePath != "" && p.PrefixRewrite != nil:
		return nil, errors.New("both a rewrite path and a prefix rewrite")
	case p.RewritePath != "":
		w, err := plainPathWord("pool rewrite path", p.RewritePath)
		if err != nil {
			return nil, err
		}
		return []encode.Word{encode.Lit("set-path"), w}, nil
	case p.PrefixRewrite != nil:
		regex, repl, err := prefixRewriteOf(p.PrefixRewrite)
		if err != nil {
			return nil, fmt.Errorf("pool %w", err)
		}
		return []encode.Word{encode.Lit("replace-path"), regex, repl}, nil
	}
	return nil, nil
}
