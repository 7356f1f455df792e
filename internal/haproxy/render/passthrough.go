package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// ssl-passthrough (model.Listener.Passthrough). A TLS listener with
// passthrough hosts changes shape; the others render as before:
//
//	frontend fe_<uuid>_<port>_sni from pier_tcp      on the listener's addresses
//	    tcp-request inspect-delay 5s
//	    tcp-request content accept if { req.ssl_hello_type 1 }
//	    use_backend %[req.ssl_sni,lower,map(<sni map>)] if { req.ssl_sni,lower,map(<sni map>) -m found }
//	    default_backend pier_tls_<uuid>_<port>
//	backend pier_tls_<uuid>_<port> from pier_tcp     hands the rest over, PROXY v2
//	    server tls abns@pier-<uuid>-<port> send-proxy-v2
//	frontend fe_<uuid>_<port>                        the terminating frontend, unchanged but its bind:
//	    bind abns@pier-<uuid>-<port> accept-proxy ssl crt-list ...
//
// The SNI map's values are pier's backend names (TCP pools); its keys
// validated exact hosts. A connection whose SNI is not in it, or that
// sends none, is terminated as before (default certificate, strict-sni),
// with the client's address carried by the PROXY header. A listener
// without certificates has no terminating frontend: such connections
// are closed. Passing whole connections means paths are never seen:
// ingress-nginx passes the whole host too.

// passthroughDelay bounds the wait for a ClientHello: longer than any
// client takes to send one after connecting, as HAProxy's examples.
const passthroughDelay = "5s"

type passthroughView struct{ host, pool string }

// terminates: the listener has a frontend that speaks HTTP (every plain
// HTTP listener, and a TLS one with certificates; never a TCP one).
func (l *listenerView) terminates() bool { return !l.tcp && (!l.tls || len(l.certs) > 0) }

func passthroughViews(l *model.Listener) ([]passthroughView, error) {
	if len(l.Passthrough) > 0 && l.Protocol != model.ProtocolTerminatedHTTPS {
		return nil, fmt.Errorf("passthrough on a %s listener", encode.Printable(string(l.Protocol)))
	}
	out := make([]passthroughView, 0, len(l.Passthrough))
	for _, r := range l.Passthrough {
		if _, err := encode.Host(r.Host); err != nil {
			return nil, fmt.Errorf("passthrough: %w", err)
		}
		if err := encode.ID("", r.PoolID).Err(); err != nil {
			return nil, fmt.Errorf("passthrough %s: %w", encode.Printable(r.Host), err)
		}
		out = append(out, passthroughView{host: r.Host, pool: r.PoolID})
	}
	slices.SortFunc(out, func(a, b passthroughView) int { return cmp.Compare(a.host, b.host) })
	for i := 1; i < len(out); i++ {
		if out[i].host == out[i-1].host {
			return nil, fmt.Errorf("passthrough host %s twice", encode.Printable(out[i].host))
		}
	}
	return out, nil
}

// checkPassthroughPools: a passthrough host goes to a TCP pool, and a TCP
// pool takes nothing but passthrough hosts (an HTTP route to it would
// get bytes it cannot parse).
func checkPassthroughPools(v *view) error {
	tcp := map[string]bool{}
	for _, p := range v.pools {
		tcp[p.id] = p.tcp
	}
	for _, l := range v.listeners {
		for _, r := range l.passthrough {
			if !tcp[r.pool] {
				return fmt.Errorf("listener %d: passthrough %s: pool %s is not a TCP pool", l.port, encode.Printable(r.host), encode.Printable(r.pool))
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

// passthroughMaps names each passthrough listener's SNI map by digest,
// as the routing maps.
func passthroughMaps(v *view, at layout.LB) ([]MapFile, error) {
	var out []MapFile
	for i := range v.listeners {
		l := &v.listeners[i]
		if len(l.passthrough) == 0 {
			continue
		}
		var data []byte
		for _, r := range l.passthrough {
			h, err := encode.Host(r.host)
			if err != nil {
				return nil, err
			}
			line, err := encode.MapLine(h.Word(), backendName(v.uuid, r.pool))
			if err != nil {
				return nil, fmt.Errorf("passthrough map: %w", err)
			}
			data = append(data, line...)
		}
		sum := sha256.Sum256(data)
		path, err := at.RouteMap(l.port, "sni", hex.EncodeToString(sum[:]))
		if err != nil {
			return nil, err
		}
		l.passthroughMap = path
		out = append(out, MapFile{Path: path, Data: data})
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

func writePassthrough(c *encode.Config, v *view, l *listenerView) {
	sni := encode.Concat(encode.ID("fe_", v.uuid), encode.Lit("_"), encode.Num(l.port), encode.Lit("_sni"))
	handoffBackend := encode.Concat(encode.ID("pier_tls_", v.uuid), encode.Lit("_"), encode.Num(l.port))
	lookup := encode.Concat(encode.Lit("req.ssl_sni,lower,map("), encode.FilePath(l.passthroughMap), encode.Lit(")"))
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
	c.Line(encode.Lit("use_backend"), encode.Concat(encode.Lit("%["), lookup, encode.Lit("]")), ifWord,
		openBrace, lookup, encode.Lit("-m"), encode.Lit("found"), closeBrace)
	if !l.terminates() {
		return
	}
	c.Line(encode.Lit("default_backend"), handoffBackend)
	c.Blank()
	c.Section(encode.Lit("backend"), handoffBackend, encode.Lit("from"), tcpDefaults)
	c.Line(encode.Lit("mode"), encode.Lit("tcp"))
	c.Line(encode.Lit("server"), encode.Lit("tls"), handoff(v.uuid, l.port), encode.Lit("send-proxy-v2"))
}
