package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// ssl-passthrough (model.Listener.Passthrough): an Ingress's
// ssl-passthrough hosts, a Gateway's TLS listeners' TLSRoutes. A TLS
// listener with passthrough hosts changes shape; the others render as
// before:
//
//	frontend fe_<uuid>_<port>_sni from pier_tcp      on the listener's addresses
//	    tcp-request inspect-delay 5s
//	    tcp-request content accept if { req.ssl_hello_type 1 }
//	    use_backend %[req.ssl_sni,lower,map(<sni map>)] if { req.ssl_sni,lower,map(<sni map>) -m found }
//	    use_backend %[req.ssl_sni,lower,map_end(<suffix map>)] if { ... -m found }   wildcards
//	    default_backend pier_tls_<uuid>_<port>       or the "" host's backend
//	backend pier_tls_<uuid>_<port> from pier_tcp     hands the rest over, PROXY v2
//	    server tls abns@pier-<uuid>-<port> send-proxy-v2
//	backend pier_refuse_<uuid>_<port> from pier_tcp  the hosts refused (no PoolID)
//	    tcp-request content reject
//	frontend fe_<uuid>_<port>                        the terminating frontend, unchanged but its bind:
//	    bind abns@pier-<uuid>-<port> accept-proxy ssl crt-list ...
//	backend pier_tlsd_<uuid>_<port>, frontend fe_<uuid>_<port>_tls
//	                                                 the hosts decrypted for TCP pools (decrypt.go)
//
// The maps' values are pier's backend names (TCP pools, the refusing
// backend, the hand-off one); their keys validated hosts: exact names in
// the sni map (map_str, a tree), the suffixes ".example.com" of
// wildcards in the suffix map, longest first, since map_end returns the
// first entry in file order that the SNI ends with. A connection whose
// SNI is in neither, or that sends none, goes to the "" host's backend
// when there is one, else is terminated as before (default certificate,
// strict-sni), with the client's address carried by the PROXY header. A
// listener without certificates has no terminating frontend: such
// connections are closed. Passing whole connections means paths are
// never seen: ingress-nginx passes the whole host too.

// passthroughDelay bounds the wait for a ClientHello: longer than any
// client takes to send one after connecting, as HAProxy's examples.
const passthroughDelay = "5s"

// passthroughView is one SNI route: to pool, or refused (no pool), or
// handed to the terminating frontend, or decrypted and then to pool
// (decrypt.go). host is an exact name, a suffix ".example.com"
// (wildcard), or "" (the rest).
type passthroughView struct {
	host      string
	wildcard  bool
	pool      string
	terminate bool
	decrypt   bool
}

// terminates: the listener has a frontend that speaks HTTP (every plain
// HTTP listener, and a TLS one with certificates; never a TCP one).
func (l *listenerView) terminates() bool { return !l.tcp && (!l.tls || len(l.certs) > 0) }

func passthroughViews(l *model.Listener) ([]passthroughView, error) {
	if len(l.Passthrough) > 0 && l.Protocol != model.ProtocolTerminatedHTTPS {
		return nil, fmt.Errorf("passthrough on a %s listener", encode.Printable(string(l.Protocol)))
	}
	out := make([]passthroughView, 0, len(l.Passthrough))
	for _, r := range l.Passthrough {
		pv := passthroughView{pool: r.PoolID, terminate: r.Terminate, decrypt: r.Decrypt}
		switch {
		case r.Host == "":
		case strings.HasPrefix(r.Host, "*"):
			v, err := encode.HostSuffix(r.Host)
			if err != nil {
				return nil, fmt.Errorf("passthrough: %w", err)
			}
			pv.host, pv.wildcard = v.String(), true
		default:
			if _, err := encode.Host(r.Host); err != nil {
				return nil, fmt.Errorf("passthrough: %w", err)
			}
			pv.host = r.Host
		}
		switch {
		case r.Terminate && r.PoolID != "":
			return nil, fmt.Errorf("passthrough %s: terminated and passed to pool %s", encode.Printable(r.Host), encode.Printable(r.PoolID))
		case r.Decrypt && (r.Terminate || r.PoolID == ""):
			return nil, fmt.Errorf("passthrough %s: decrypted, but not to a pool", encode.Printable(r.Host))
		case r.PoolID != "":
			if err := encode.ID("", r.PoolID).Err(); err != nil {
				return nil, fmt.Errorf("passthrough %s: %w", encode.Printable(r.Host), err)
			}
		}
		out = append(out, pv)
	}
	slices.SortFunc(out, comparePassthrough)
	for i := 1; i < len(out); i++ {
		if comparePassthrough(out[i], out[i-1]) == 0 {
			return nil, fmt.Errorf("passthrough host %s twice", encode.Printable(out[i].host))
		}
	}
	return out, nil
}

// comparePassthrough orders SNI routes as they are looked up: exact
// names, then suffixes longest first, then the rest ("").
func comparePassthrough(a, b passthroughView) int {
	rank := func(p passthroughView) int {
		switch {
		case p.host == "":
			return 2
		case p.wildcard:
			return 1
		}
		return 0
	}
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	if a.wildcard && len(a.host) != len(b.host) {
		return cmp.Compare(len(b.host), len(a.host))
	}
	return cmp.Compare(a.host, b.host)
}

// checkPassthroughPools: a passthrough host goes to a TCP pool, and a TCP
// pool takes nothing but passthrough hosts (an HTTP route to it would
// get bytes it cannot parse); a host handed to termination needs a
// terminating frontend.
func checkPassthroughPools(v *view) error {
	tcp := map[string]bool{}
	for _, p := range v.pools {
		tcp[p.id] = p.tcp
	}
	for _, l := range v.listeners {
		for _, r := range l.passthrough {
			if r.pool != "" && !tcp[r.pool] {
				return fmt.Errorf("listener %d: passthrough %s: pool %s is not a TCP pool", l.port, encode.Printable(r.host), encode.Printable(r.pool))
			}
			if r.terminate && !l.terminates() {
				return fmt.Errorf("listener %d: passthrough %s: terminated by a listener without certificates", l.port, encode.Printable(r.host))
			}
			if r.decrypt && len(l.decryptCerts) == 0 {
				return fmt.Errorf("listener %d: passthrough %s: decrypted by a listener without decrypt certificates", l.port, encode.Printable(r.host))
			}
		}
		if !l.tcp && l.defaultPool != "" && tcp[l.defaultPool] {
			return fmt.Errorf("listener %d: default pool %s is a TCP pool", l.port, encode.Printable(l.defaultPool))
		}
		for _, p := range l.policies {
			if p.pool != "" && tcp[p.pool] {
				return fmt.Errorf("listener %d: policy %s routes HTTP to TCP pool %s", l.port, encode.Printable(p.id), encode.Printable(p.pool))
			}
		}
	}
	return nil
}

// passthroughTarget is the backend an SNI route names.
func passthroughTarget(v *view, l *listenerView, r passthroughView) encode.Word {
	switch {
	case r.terminate:
		return handoffBackend(v.uuid, l.port)
	case r.decrypt:
		return decryptBackend(v.uuid, l.port)
	case r.pool == "":
		return refuseBackend(v.uuid, l.port)
	}
	return backendName(v.uuid, r.pool)
}

func handoffBackend(uuid string, port int) encode.Word {
	return encode.Concat(encode.ID("pier_tls_", uuid), encode.Lit("_"), encode.Num(port))
}

func refuseBackend(uuid string, port int) encode.Word {
	return encode.Concat(encode.ID("pier_refuse_", uuid), encode.Lit("_"), encode.Num(port))
}

// passthroughMaps names each passthrough listener's SNI maps (exact
// names, then suffixes) by digest, as the routing maps.
func passthroughMaps(v *view, at layout.LB) ([]MapFile, error) {
	var out []MapFile
	for i := range v.listeners {
		l := &v.listeners[i]
		if len(l.passthrough) == 0 {
			continue
		}
		exact, suffix, err := sniMapData(l.passthrough, func(r passthroughView) encode.Word { return passthroughTarget(v, l, r) })
		if err != nil {
			return nil, err
		}
		dExact, dSuffix, err := decryptMapData(v, l)
		if err != nil {
			return nil, err
		}
		for _, m := range []struct {
			table string
			data  []byte
			path  *string
		}{{"sni", exact, &l.passthroughMap}, {"sni.suffix", suffix, &l.passthroughSuffixMap},
			{"tls", dExact, &l.decryptMap}, {"tls.suffix", dSuffix, &l.decryptSuffixMap}} {
			if len(m.data) == 0 {
				continue
			}
			sum := sha256.Sum256(m.data)
			path, err := at.RouteMap(l.port, m.table, hex.EncodeToString(sum[:]))
			if err != nil {
				return nil, err
			}
			*m.path = path
			out = append(out, MapFile{Path: path, Data: m.data})
		}
	}
	return out, nil
}

// handoff is the abstract socket between the SNI frontend and the
// terminating one: per network namespace, named by the load balancer and
// port, so load balancers packed into one process never share one.
func handoff(uuid string, port int) encode.Word {
	return encode.Concat(encode.Lit("abns@pier-"), encode.ID("", uuid), encode.Lit("-"), encode.Num(port))
}

// frontendBinds are the bind addresses (with their address words) of a
// terminating frontend: the listener's addresses, or the hand-off
// socket behind a passthrough frontend, which reads the PROXY header
// for the client's address.
func frontendBinds(v *view, l *listenerView) [][]encode.Word {
	if len(l.passthrough) > 0 {
		return [][]encode.Word{{handoff(v.uuid, l.port), encode.Lit("accept-proxy")}}
	}
	var out [][]encode.Word
	for _, a := range []netip.Addr{v.vip, v.fip} {
		if a.IsValid() { // no FIP: invalid
			out = append(out, []encode.Word{encode.AddrPort(a, l.port), foreignBind})
		}
	}
	return out
}

// sniMapData renders routes (each with a host) as the lines of an exact
// map and of a suffix map, the value of each line target's.
func sniMapData(routes []passthroughView, target func(passthroughView) encode.Word) (exact, suffix []byte, err error) {
	for _, r := range routes {
		if r.host == "" {
			continue
		}
		h, err := encode.Host(r.host)
		if r.wildcard {
			h, err = encode.HostSuffix("*" + r.host)
		}
		if err != nil {
			return nil, nil, err
		}
		line, err := encode.MapLine(h.Word(), target(r))
		if err != nil {
			return nil, nil, fmt.Errorf("passthrough map: %w", err)
		}
		if r.wildcard {
			suffix = append(suffix, line...)
		} else {
			exact = append(exact, line...)
		}
	}
	return exact, suffix, nil
}

func writePassthrough(c *encode.Config, v *view, l *listenerView) {
	sni := encode.Concat(encode.ID("fe_", v.uuid), encode.Lit("_"), encode.Num(l.port), encode.Lit("_sni"))
	c.Blank()
	c.Section(encode.Lit("frontend"), sni, encode.Lit("from"), tcpDefaults)
	c.Line(encode.Lit("mode"), encode.Lit("tcp"))
	for _, a := range []netip.Addr{v.vip, v.fip} {
		if a.IsValid() {
			c.Line(encode.Lit("bind"), encode.AddrPort(a, l.port), foreignBind)
		}
	}
	c.Line(encode.Lit("tcp-request"), encode.Lit("inspect-delay"), encode.Lit(passthroughDelay))
	c.Line(encode.Lit("tcp-request"), encode.Lit("content"), encode.Lit("accept"), ifWord,
		openBrace, encode.Lit("req.ssl_hello_type"), encode.Num(1), closeBrace)
	for _, m := range []struct {
		conv encode.Word
		path string
	}{{encode.Lit(",map("), l.passthroughMap}, {encode.Lit(",map_end("), l.passthroughSuffixMap}} {
		if m.path == "" {
			continue
		}
		lookup := encode.Concat(encode.Lit("req.ssl_sni,lower"), m.conv, encode.FilePath(m.path), encode.Lit(")"))
		c.Line(encode.Lit("use_backend"), encode.Concat(encode.Lit("%["), lookup, encode.Lit("]")), ifWord,
			openBrace, lookup, encode.Lit("-m"), encode.Lit("found"), closeBrace)
	}
	refuses, handsOff := false, l.terminates()
	switch last := l.passthrough[len(l.passthrough)-1]; {
	case last.host == "":
		c.Line(encode.Lit("default_backend"), passthroughTarget(v, l, last))
	case l.terminates():
		c.Line(encode.Lit("default_backend"), handoffBackend(v.uuid, l.port))
	}
	for _, r := range l.passthrough {
		refuses = refuses || (r.pool == "" && !r.terminate)
	}
	if l.decrypts() {
		refuses = writeDecrypt(c, v, l) || refuses
	}
	if handsOff {
		c.Blank()
		c.Section(encode.Lit("backend"), handoffBackend(v.uuid, l.port), encode.Lit("from"), tcpDefaults)
		c.Line(encode.Lit("mode"), encode.Lit("tcp"))
		c.Line(encode.Lit("server"), encode.Lit("tls"), handoff(v.uuid, l.port), encode.Lit("send-proxy-v2"))
	}
	if refuses {
		c.Blank()
		c.Section(encode.Lit("backend"), refuseBackend(v.uuid, l.port), encode.Lit("from"), tcpDefaults)
		c.Line(encode.Lit("mode"), encode.Lit("tcp"))
		c.Line(encode.Lit("tcp-request"), encode.Lit("content"), encode.Lit("reject"))
	}
}
