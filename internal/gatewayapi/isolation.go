package gatewayapi

import (
	"net/http"

	"pier.dev/pier/internal/model"
)

// Listener isolation (the Gateway API's GatewayHTTPListenerIsolation):
// listeners sharing a port share one model listener, told apart by host
// rules, and a request belongs to the most specific listener whose
// hostname matches its host (an exact name, then the longest wildcard,
// then a listener without hostname). Only that listener's routes may
// answer it: a request for abc.foo.example.com that none of the
// abc.foo.example.com listener's routes match is a 404, not a match for a
// *.example.com listener's route. Translation keeps HAProxy's
// constant-time map routing by two means, both plain policies:
//
//   - a route's entry for a host that a more specific listener owns is
//     dropped (a route on the listener without hostname that names
//     abc.foo.example.com);
//   - a listener whose hostname a less specific listener on the port also
//     matches gets an isolation entry: its hostname, PathPrefix "/",
//     answering 404, after its routes' entries for that host. The host
//     lookup tries exact names, then longer suffixes first, so a request
//     the listener owns stops there and never falls through to the less
//     specific listener's entries.

// ownerOf is the most specific usable listener on port whose hostname
// matches every name host stands for (a name, a wildcard, or "" for any
// host); nil when none does.
func (p *parsedGateway) ownerOf(port int, host string) *gwListener {
	var best *gwListener
	for _, l := range p.listeners {
		if l.port != port || !l.usable() || !listenerMatches(l.host, host) {
			continue
		}
		if best == nil || hostMoreSpecific(l.host, best.host) {
			best = l
		}
	}
	return best
}

// ownedHosts keeps the hosts of a route's entries on l that l owns.
func (p *parsedGateway) ownedHosts(l *gwListener, hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if p.ownerOf(l.port, h) == l {
			out = append(out, h)
		}
	}
	return out
}

// listenerMatches reports whether a listener hostname (l, "" for any)
// matches every name of h (a name, a wildcard, "" for any host).
func listenerMatches(l, h string) bool {
	switch {
	case l == "" || l == h:
		return true
	case h == "" || !isWildcard(l):
		return false
	}
	return covers(l, h)
}

// hostMoreSpecific orders listener hostnames: a name, then wildcards by
// longer suffix, then none.
func hostMoreSpecific(a, b string) bool {
	if ra, rb := gatewayHostRank(a), gatewayHostRank(b); ra != rb {
		return ra < rb
	}
	return len(a) > len(b)
}

// isolationEntries are the 404 entries of the listeners on port whose
// hostname a less specific usable listener there also matches.
func (p *parsedGateway) isolationEntries(port int) []gwEntry {
	var out []gwEntry
	for _, l := range p.listeners {
		if l.port != port || !l.usable() || l.host == "" || l.tlsListener() || !p.shadows(l) {
			continue
		}
		out = append(out, gwEntry{host: l.host, match: gwMatch{pathMatch: model.CompareStartsWith, path: "/"},
			status: http.StatusNotFound, isolation: true, breadth: breadthIsolation})
	}
	return out
}

// shadows reports whether another usable listener on l's port matches
// l's hostname: without l's isolation entry, it would take l's requests
// that l's routes do not match.
func (p *parsedGateway) shadows(l *gwListener) bool {
	for _, o := range p.listeners {
		if o != l && o.port == l.port && o.usable() && listenerMatches(o.host, l.host) {
			return true
		}
	}
	return false
}
