package render

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
)

// TLS terminated in front of TCP backends (model.PassthroughRoute's
// Decrypt: a Gateway's TLS listener in tls.mode Terminate). The port's
// SNI frontend (passthrough.go) chooses as for every SNI route, and
// hands a decrypted host's connection to a second frontend of the port,
// which terminates it with the listener's decrypt certificates and
// forwards the plain bytes to the host's TCP pool:
//
//	frontend fe_<uuid>_<port>_sni ...                 sni map: <host> pier_tlsd_<uuid>_<port>
//	backend pier_tlsd_<uuid>_<port> from pier_tcp     hands it over, PROXY v2
//	    server tls abns@pier-<uuid>-<port>-tls send-proxy-v2
//	frontend fe_<uuid>_<port>_tls from pier_tcp
//	    mode tcp
//	    bind abns@pier-<uuid>-<port>-tls accept-proxy ssl crt <first decrypt cert> crt-list <crt-list>
//	    use_backend %[ssl_fc_sni,lower,map(<tls map>)] if { ... -m found }
//	    use_backend %[ssl_fc_sni,lower,map_end(<tls suffix map>)] if { ... -m found }
//	    default_backend be_<uuid>_<pool of the "" decrypt route>   or pier_refuse_<uuid>_<port>
//
// The second frontend's maps hold the decrypted routes only, in the SNI
// frontend's order, so the SNI that brought a connection there chooses
// the same route again: an exact name is in both, the longest suffix of
// all the routes that matched is the longest of the decrypted ones, and
// a connection sent by the "" route matches nothing else in either.
// Listeners of both tls.modes, and HTTPS ones, share a port this way
// (mixed termination): every SNI goes to its own listener's frontend
// before anything is decrypted. The bind names the listener's first
// decrypt certificate before the load balancer's crt-list, so a client
// without SNI (a Terminate listener without hostname) gets that one,
// not an HTTPS listener's; the crt-list serves the others by SNI.

// decrypts reports whether some SNI route of l is decrypted.
func (l *listenerView) decrypts() bool {
	for _, r := range l.passthrough {
		if r.decrypt {
			return true
		}
	}
	return false
}

func decryptBackend(uuid string, port int) encode.Word {
	return encode.Concat(encode.ID("pier_tlsd_", uuid), encode.Lit("_"), encode.Num(port))
}

// decryptSocket is the abstract socket of the decrypting frontend, named
// as the HTTPS hand-off's (handoff) with its own suffix.
func decryptSocket(uuid string, port int) encode.Word {
	return encode.Concat(handoff(uuid, port), encode.Lit("-tls"))
}

// decryptRoutes are l's decrypted SNI routes, in lookup order.
func decryptRoutes(l *listenerView) []passthroughView {
	var out []passthroughView
	for _, r := range l.passthrough {
		if r.decrypt {
			out = append(out, r)
		}
	}
	return out
}

// decryptDefaults names each decrypting listener's first decrypt
// certificate file, the one its bind serves to clients without SNI.
func decryptDefaults(v *view, at layout.LB) error {
	for i := range v.listeners {
		l := &v.listeners[i]
		if !l.decrypts() {
			continue
		}
		path, err := at.Cert(l.decryptCerts[0].ID, l.decryptCerts[0].SHA256)
		if err != nil {
			return fmt.Errorf("listener %d: decrypt certificate: %w", l.port, err)
		}
		l.decryptDefault = path
	}
	return nil
}

// decryptMapData are the decrypting frontend's maps: host to TCP pool.
func decryptMapData(v *view, l *listenerView) (exact, suffix []byte, err error) {
	return sniMapData(decryptRoutes(l), func(r passthroughView) encode.Word { return backendName(v.uuid, r.pool) })
}

// writeDecrypt writes the hand-off backend and the decrypting frontend
// of l. It reports whether the frontend refuses what matches no route
// (then the caller writes the refusing backend).
func writeDecrypt(c *encode.Config, v *view, l *listenerView) bool {
	c.Blank()
	c.Section(encode.Lit("backend"), decryptBackend(v.uuid, l.port), encode.Lit("from"), tcpDefaults)
	c.Line(encode.Lit("mode"), encode.Lit("tcp"))
	c.Line(encode.Lit("server"), encode.Lit("tls"), decryptSocket(v.uuid, l.port), encode.Lit("send-proxy-v2"))

	c.Blank()
	c.Section(encode.Lit("frontend"), encode.Concat(encode.ID("fe_", v.uuid), encode.Lit("_"), encode.Num(l.port), encode.Lit("_tls")),
		encode.Lit("from"), tcpDefaults)
	c.Line(encode.Lit("mode"), encode.Lit("tcp"))
	c.Line(encode.Lit("bind"), decryptSocket(v.uuid, l.port), encode.Lit("accept-proxy"), encode.Lit("ssl"),
		encode.Lit("crt"), encode.FilePath(l.decryptDefault), encode.Lit("crt-list"), encode.FilePath(v.crtListPath))
	for _, m := range []struct {
		conv encode.Word
		path string
	}{{encode.Lit(",map("), l.decryptMap}, {encode.Lit(",map_end("), l.decryptSuffixMap}} {
		if m.path == "" {
			continue
		}
		lookup := encode.Concat(encode.Lit("ssl_fc_sni,lower"), m.conv, encode.FilePath(m.path), encode.Lit(")"))
		c.Line(encode.Lit("use_backend"), encode.Concat(encode.Lit("%["), lookup, encode.Lit("]")), ifWord,
			openBrace, lookup, encode.Lit("-m"), encode.Lit("found"), closeBrace)
	}
	routes := decryptRoutes(l)
	if last := routes[len(routes)-1]; last.host == "" {
		c.Line(encode.Lit("default_backend"), backendName(v.uuid, last.pool))
		return false
	}
	c.Line(encode.Lit("default_backend"), refuseBackend(v.uuid, l.port))
	return true
}
