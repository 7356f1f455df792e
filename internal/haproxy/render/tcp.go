package render

import (
	"errors"
	"fmt"
	"net/netip"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// A TCP listener on an haproxy load balancer (a Gateway's TCP listener,
// its TCPRoute's backends) forwards whole connections, as ssl-passthrough
// does, on the same addresses as the HTTP listeners, so that it moves
// with the pair like them:
//
//	frontend fe_<uuid>_<port> from pier_tcp
//	    mode tcp
//	    bind <vip>:<port> transparent
//	    bind <fip>:<port> transparent
//	    default_backend be_<uuid>_<tcp pool>        or, without a pool:
//	    tcp-request connection reject
//
// A TCP connection carries nothing to route by, so the listener has one
// pool, or none: then every connection is refused (the spec's answer to
// a route whose backends do not resolve, or to no route at all).

// tcpListenerOf checks what a TCP listener may not have: routing by
// host or path needs HTTP, certificates need a TLS listener.
func tcpListenerOf(l *model.Listener, lv *listenerView) error {
	switch {
	case len(l.Certificates) > 0 || len(l.DecryptCertificates) > 0 || l.StrictSNI:
		return errors.New("a TCP listener has no certificates")
	case len(l.Policies) > 0:
		return errors.New("a TCP listener has no policies, only a default pool")
	case len(l.Passthrough) > 0 || len(l.ListenerHosts) > 0:
		return errors.New("a TCP listener has no hosts")
	}
	lv.tcp = true
	return nil
}

// checkTCPListeners: a TCP listener's pool is a TCP pool (an HTTP one
// would parse bytes that are not HTTP).
func checkTCPListeners(v *view) error {
	tcp := map[string]bool{}
	for _, p := range v.pools {
		tcp[p.id] = p.tcp
	}
	for _, l := range v.listeners {
		if l.tcp && l.defaultPool != "" && !tcp[l.defaultPool] {
			return fmt.Errorf("listener %d: TCP listener's pool %s is not a TCP pool", l.port, encode.Printable(l.defaultPool))
		}
	}
	return nil
}

func writeTCPFrontend(c *encode.Config, v *view, l *listenerView) {
	c.Blank()
	c.Section(encode.Lit("frontend"), frontendName(v.uuid, l.port), encode.Lit("from"), tcpDefaults)
	c.Line(encode.Lit("mode"), encode.Lit("tcp"))
	for _, a := range []netip.Addr{v.vip, v.fip} {
		if a.IsValid() { // no FIP: invalid
			c.Line(encode.Lit("bind"), encode.AddrPort(a, l.port), foreignBind)
		}
	}
	if l.defaultPool == "" {
		c.Line(encode.Lit("tcp-request"), encode.Lit("connection"), encode.Lit("reject"))
		return
	}
	c.Line(encode.Lit("default_backend"), backendName(v.uuid, l.defaultPool))
}
