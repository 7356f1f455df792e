package nativedriver

import (
	"errors"
	"fmt"
	"net/netip"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/nft"
)

// services turns a native load balancer into what the kernel serves: one
// nft service per listener, on the VIP and the FIP. Every value is parsed
// again into a typed address, port or protocol here: the store is not
// trusted to hold only what translate produced. A spec that cannot be
// served is refused with driver.ErrRejected.
func services(lb *model.LoadBalancer) ([]nft.Service, error) {
	if lb.Provider != model.ProviderNative {
		return nil, reject("provider %q is not native", lb.Provider)
	}
	var addrs []netip.Addr
	for _, s := range []string{lb.VIP, lb.FIP} {
		if s == "" {
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return nil, reject("address %q: only IPv4 addresses are served", s)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, reject("no address")
	}
	pools := map[string]*model.Pool{}
	for i := range lb.Pools {
		pools[lb.Pools[i].ID] = &lb.Pools[i]
	}
	var out []nft.Service
	for _, l := range lb.Listeners {
		s, err := service(lb.UUID, l, pools[l.DefaultPoolID], addrs)
		if err != nil {
			return nil, err
		}
		// Several nodes serve an ECMP placement at once and a router may
		// move a flow between them mid-way: each picks a new flow's
		// endpoint by a consistent hash of it (a Maglev table), the same
		// on every node, so a moved flow reaches the endpoint it started
		// on.
		s.Consistent = len(lb.Placement.ECMP) > 0
		out = append(out, s)
	}
	return out, nil
}

func service(uuid string, l model.Listener, pool *model.Pool, addrs []netip.Addr) (nft.Service, error) {
	s := nft.Service{ID: model.ID(uuid, string(l.Protocol), fmt.Sprint(l.Port)), Addrs: addrs}
	switch l.Protocol {
	case model.ProtocolTCP:
		s.Proto = nft.TCP
	case model.ProtocolUDP:
		s.Proto = nft.UDP
	default:
		return s, reject("listener protocol %q: the native provider serves TCP and UDP", l.Protocol)
	}
	if l.Port < 1 || l.Port > 65535 {
		return s, reject("listener port %d out of range", l.Port)
	}
	s.Port = uint16(l.Port)
	if pool == nil {
		return s, nil // no pool: refused like a pool with no endpoint
	}
	s.SourceHash = pool.Algorithm == model.AlgorithmSourceIP
	// A UDPRoute of several backendRefs is one pool whose members weigh
	// their Service's share, and whose FailWeight of FailTotal is the
	// share of refs that do not resolve or have no endpoint: refused.
	if pool.FailWeight != 0 || pool.FailTotal != 0 {
		if pool.FailWeight < 1 || pool.FailWeight >= pool.FailTotal {
			return s, reject("pool %s: fail share %d of %d is not a share", pool.ID, pool.FailWeight, pool.FailTotal)
		}
		s.Reject, s.RejectOf = int64(pool.FailWeight), int64(pool.FailTotal)
	}
	for _, m := range pool.Members {
		a, err := netip.ParseAddr(m.Address)
		if err != nil || !a.Is4() {
			return s, reject("member %q: only IPv4 endpoints are served", m.Address)
		}
		if m.Port < 1 || m.Port > 65535 {
			return s, reject("member port %d out of range", m.Port)
		}
		// A weight of 0 counts as 1, as HAProxy's renderer does: the
		// model has no draining flag.
		if m.Weight < 0 || int64(m.Weight) > nft.MaxWeight {
			return s, reject("member weight %d out of range", m.Weight)
		}
		s.Backends = append(s.Backends, nft.Backend{Addr: a, Port: uint16(m.Port), Weight: int64(m.Weight)})
	}
	return s, nil
}

func reject(format string, args ...any) error {
	return fmt.Errorf("%w: %s", driver.ErrRejected, fmt.Sprintf(format, args...))
}

// errNft wraps what nft refused; it is a rejection too: the same text
// would be refused again.
var errNft = errors.New("nft refused the ruleset")
