package encode

import "strings"

// routeKeyChars is what a routing-map key may hold: host names (with the
// wildcard's '*') and Path's allow-list. No whitespace, no control byte,
// no quote, no '#': map files are split on spaces and lines, and '#'
// starts a comment.
var routeKeyChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~!$&()*+,;=:@%/-")

// RouteKey makes the key of one routing-map entry (render's route maps):
// the host, then the path, then "/" when path is not empty. host is ""
// (no host), an exact host or a wildcard host; path is "" (a host's
// catch-all entry, keyed by the host alone) or an Ingress path. Both are
// validated again here, whatever translate checked: a key that reached a
// map file unchecked could add a line or a second key.
func RouteKey(host, path string) Word {
	bad := func(err error) Word { return Word{err: err} }
	if host == "" && path == "" {
		return bad(refuse("route key", "empty", "", "needs a host or a path"))
	}
	if err := checkKeyHost(host); err != nil {
		return bad(err)
	}
	key := host
	if path != "" {
		if _, err := Path(path, PathExact); err != nil {
			return bad(err)
		}
		key += path + "/"
	}
	for i := 0; i < len(key); i++ {
		if !routeKeyChars[key[i]] {
			return bad(refuse("route key", "charset", key, "contains "+describeByte(key[i])))
		}
	}
	if key[0] == '#' || len(key) > MaxHostLen+MaxPathLen+1 {
		return bad(refuse("route key", "syntax", key, "starts with '#' or is too long"))
	}
	return Word{s: key, kind: kindUser, quote: true}
}

// checkKeyHost validates a route key's host: a wildcard, an exact host,
// or none.
func checkKeyHost(host string) error {
	var err error
	switch {
	case strings.HasPrefix(host, "*"):
		_, err = WildcardHost(host)
	case host != "":
		_, err = Host(host)
	}
	return err
}

// RegexRouteKey makes the key of one map_reg routing entry (render's
// regular-expression routes): the request key is the host then the raw
// path (no host for a host-less route), so the key is the match limit,
// "^", the host with its "." and "*" escaped, then re without its
// leading "^" (it starts with "/", which no host holds). re comes from ParsePathRegex: no
// space, no control byte; it starts with "^", never with "#".
func RegexRouteKey(host string, re PathRegex) Word {
	bad := func(err error) Word { return Word{err: err} }
	if err := checkKeyHost(host); err != nil {
		return bad(err)
	}
	if !strings.HasPrefix(re.canon, "^/") {
		return bad(refuse("regex route key", "syntax", re.canon, "not a path regex"))
	}
	escaped := strings.NewReplacer(".", `\.`, "*", `\*`).Replace(host)
	return Word{s: matchLimitPrefix + "^" + escaped + re.canon[1:], kind: kindUser, quote: true}
}

// LandingKey makes the key of a landing process's routing entry (render's
// landing.go): the load balancer's landing id, ":", then its own route
// key (RouteKey). ":" ends the id, so no key of id 1 is a prefix of one
// of id 12, and the entries of many load balancers share one map.
func LandingKey(id int, routeKey Word) Word {
	if err := routeKey.Err(); err != nil {
		return Word{err: err}
	}
	if routeKey.kind != kindUser {
		return Word{err: refuse("landing key", "kind", routeKey.s, "not a route key")}
	}
	w := LandingRoot(id)
	if w.err == nil {
		w.s += routeKey.s
	}
	return w
}

// LandingRoot is the key of a load balancer's host-less catch-all in a
// landing process, "<id>:", which no path key equals (those go on with
// "/").
func LandingRoot(id int) Word {
	if id < 0 {
		return Word{err: refuse("landing key", "range", itoa(id), "id must not be negative")}
	}
	return Word{s: itoa(id) + ":", kind: kindUser, quote: true}
}
