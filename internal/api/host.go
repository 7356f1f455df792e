package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// hostGuard answers only requests whose Host names the listener: DNS
// rebinding points a name the attacker owns at 127.0.0.1 (or the pod's
// address), and a browser that loaded the attacker's page then reads
// pier's API and web view as same-origin, with the attacker's name in
// Host. Accepted:
//
//   - an IP literal, with or without a port (a port forward changes it),
//     that is the address the listener is bound to, or any IP literal when
//     it is bound to every address (0.0.0.0, ::): an IP literal is never
//     resolved, so it cannot be rebound;
//   - localhost when the listener is bound to a loopback address or to
//     every address;
//   - the names and addresses the operator lists (--api-allowed-hosts), for
//     a Service name, a Service's cluster IP or a proxy in front;
//   - no Host at all (HTTP/1.0): a browser always sends one.
//
// Anything else is answered 421 Misdirected Request with a short body
// that names the flag, and logged at debug: a scanner would fill the log.
type hostGuard struct {
	next     http.Handler
	bound    netip.Addr // zero when unknown
	wildcard bool
	names    map[string]bool
}

func newHostGuard(next http.Handler, listen net.Addr, names []string) *hostGuard {
	g := &hostGuard{next: next, names: map[string]bool{}}
	if tcp, ok := listen.(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(tcp.IP); ok {
			g.bound = a.Unmap().WithZone("")
			g.wildcard = g.bound.IsUnspecified()
		}
	}
	for _, n := range names {
		if a, err := netip.ParseAddr(n); err == nil {
			n = a.Unmap().String()
		}
		g.names[normalHost(n)] = true
	}
	return g
}

// normalHost is a host name as the guard compares it: lowercase, without
// a trailing dot.
func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func (g *hostGuard) allowed(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		return g.wildcard || a == g.bound || g.names[a.String()]
	}
	name := normalHost(host)
	if g.names[name] {
		return true
	}
	return name == "localhost" && (g.wildcard || g.bound.IsLoopback())
}

func (g *hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.allowed(r.Host) {
		g.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusMisdirectedRequest)
	_, _ = fmt.Fprintln(w, "this host name is not one of pier's API: use its address, or list the name with --api-allowed-hosts")
}

// CheckAllowedHosts validates the entries of --api-allowed-hosts: host
// names (letters, digits, '-', '.') or IP addresses, without a port or a
// scheme. The address pier listens on needs no entry.
func CheckAllowedHosts(names []string) error {
	for _, n := range names {
		if n == "" {
			return errors.New("empty name")
		}
		if _, err := netip.ParseAddr(n); err == nil {
			continue
		}
		for _, c := range n {
			ok := c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
			if !ok {
				return fmt.Errorf("%q is not a host name (letters, digits, '-' and '.') nor an IP address; no port", n)
			}
		}
	}
	return nil
}
