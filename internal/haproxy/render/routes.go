package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// Route maps make routing cost independent of the number of routes: a
// listener looks the request up in at most eight map lookups (ebtree, log
// n) instead of testing one ACL pair per policy (measured before: the
// first of 120 routes served 42-47k req/s, the last 28-33k).
//
// There is one map file per host class and kind, so a key of one class
// can never hit an entry of another:
//
//	class     key of an entry                    request key
//	host      "foo.com" + path + "/"             txn.pier_host + path + "/"
//	wildcard  "*.foo.com" + path + "/"           txn.pier_hwild + path + "/"
//	suffix    "foo.com" + path + "/"             txn.pier_hsuf + path + "/"
//	any       path + "/"                         path + "/"
//
// The suffix class is the Gateway API's wildcard ("*.foo.com" matches
// "a.b.foo.com"): txn.pier_hsuf is the host's last n labels when more
// precede them, one round of lookups per label count n of the listener's
// suffixes, most labels first (suffixLevel): bounded by the distinct
// label counts of its rules, not by their number.
//
// The ".exact" file is read with map_str and holds the Exact paths, plus
// each host's catch-all (Prefix "/") keyed by the host alone, which no
// path key can equal (a path key always holds a "/"). The ".prefix" file
// is read with map_beg, which returns the longest entry the key starts
// with. Appending "/" to both sides makes map_beg element-wise: Prefix
// "/foo" is the entry "foo.com/foo/", which "foo.com/foo/" (path /foo)
// and "foo.com/foo/bar/" start with, "foo.com/foobar/" does not. The "/"
// also keeps an Exact "/foo" ("foo.com/foo/") apart from "/foo/"
// ("foo.com/foo//"). A Prefix path never ends with "/" (translate and
// here trim it), so "/foo/" as Prefix is "/foo".
//
// Lookups run in policy precedence, each only while nothing matched:
// for host, then wildcard, then suffix, then any: Exact, then the longest Prefix, then
// the catch-all. The catch-all with no host is a constant. That order is
// translate's order (policiesFor), so a listener whose policies are not
// sorted that way (a hand-written store) keeps the ACL rules instead.
//
// A Host header holding "/" gets no host key: "a/b.foo.com" + "/x"
// would be the key of host "a" and path "/b.foo.com/x". HAProxy 2.6
// already answers 400 to such a Host over HTTP/1.1 (TestIntegrationRoutes);
// the guard keeps the keys sound wherever it does not (HTTP/2's
// :authority was not checked). Such a request matches only rules without
// a host.

// Map values are backend names, rejectValue or a statusValue, which no
// backend has.
var rejectValue = encode.Lit("pier_reject")

// fixedStatuses are the statuses a FIXED_RESPONSE answers: HAProxy 2.6
// has an error page for each. 404 is a Gateway listener's isolation
// entry (a request its routes do not match).
var fixedStatuses = map[int]bool{404: true, 500: true, 501: true, 502: true, 503: true, 504: true}

// statusValue is the map value of a FIXED_RESPONSE policy.
func statusValue(status int) encode.Word {
	return encode.Concat(encode.Lit("pier_status_"), encode.Num(status))
}

type hostClass int

const (
	classHost hostClass = iota
	classWildcard
	classSuffix // Gateway API wildcards: one or more labels
	classAny
)

var classNames = [...]string{"host", "wildcard", "suffix", "any"}

// nClasses sizes the per-class arrays.
const nClasses = len(classNames)

// route is one policy as a map entry.
type route struct {
	class hostClass
	host  string // "" for classAny; the suffix without "*." for classSuffix
	exact bool   // Exact path; otherwise Prefix, or regex
	regex bool   // a PATH REGEX: path is the expression (regexLookup)
	path  string // Prefix: without trailing "/", "" for "/"
	// conds are the method, header and query rules (matches.go), in
	// cond order; none for an Ingress.
	conds []cond
}

// routeOf reads a policy with at most one host rule and one path rule;
// ok is false for anything else, which the maps cannot express.
func routeOf(p *model.L7Policy) (r route, ok bool) {
	r.class = classAny
	var hosts, paths int
	for _, rule := range p.Rules {
		switch {
		case rule.Type == model.RuleHostName && rule.Compare == model.CompareEqualTo:
			r.class, r.host, hosts = classHost, rule.Value, hosts+1
		case rule.Type == model.RuleHostName && rule.Compare == model.CompareWildcard:
			r.class, r.host, hosts = classWildcard, rule.Value, hosts+1
		case rule.Type == model.RuleHostName && rule.Compare == model.CompareSuffix:
			r.class, r.host, hosts = classSuffix, strings.TrimPrefix(rule.Value, "*."), hosts+1
		case rule.Type == model.RulePath && rule.Compare == model.CompareEqualTo:
			r.exact, r.path, paths = true, rule.Value, paths+1
		case rule.Type == model.RulePath && rule.Compare == model.CompareStartsWith:
			r.exact, r.path, paths = false, strings.TrimRight(rule.Value, "/"), paths+1
		case rule.Type == model.RulePath && rule.Compare == model.CompareRegex:
			r.regex, r.path, paths = true, rule.Value, paths+1
		case isCond(rule):
			r.conds = append(r.conds, cond{typ: rule.Type, key: rule.Key, value: rule.Value})
		default:
			return r, false
		}
	}
	// A regular expression is an Ingress's: never with HTTPRoute
	// matches or a Gateway wildcard, which its lookup does not test.
	regexOK := !r.regex || (len(r.conds) == 0 && r.class != classSuffix)
	return r, hosts <= 1 && paths <= 1 && regexOK && sortConds(r.conds)
}

// pathRank orders a class's lookups: Exact, then the regular
// expressions, then Prefix (the longest first) and the catch-all.
func (r route) pathRank() int {
	switch {
	case r.exact:
		return 0
	case r.regex:
		return 1
	}
	return 2
}

// before compares two routes in the precedence the lookups implement:
// class (a Gateway wildcard's longer suffix first), Exact before regular
// expressions before Prefix, longer ones first, then (HTTPRoute
// matches, translate's gatewayEntryBefore) for one host and path a method
// before none, more headers, more query parameters. Two routes it calls
// equal never match the same request unless they are the same entry, or
// policies of one group, whose order the match maps check (orderable).
func before(a, b route) int {
	if c := cmp.Compare(a.class, b.class); c != 0 {
		return c
	}
	if a.class == classSuffix && len(a.host) != len(b.host) {
		// The longer suffix first: of two that match one host, it has
		// more labels, and its level runs first (suffixLevel).
		return cmp.Compare(len(b.host), len(a.host))
	}
	if c := cmp.Compare(a.pathRank(), b.pathRank()); c != 0 {
		return c
	}
	if !a.exact {
		if c := cmp.Compare(len(b.path), len(a.path)); c != 0 {
			return c
		}
	}
	if a.host != b.host || a.path != b.path {
		return 0 // different keys: no request meets both in one lookup
	}
	return condsBefore(a.conds, b.conds)
}

// Map file kinds of a class.
const (
	kindExact      = iota
	kindPrefix     // map_beg
	kindRegex      // map_reg: regular-expression routes (regexLookup)
	kindRegexHosts // map_str: the hosts that have regular-expression routes
	nKinds
)

// routeTable is a listener's routing as maps.
type routeTable struct {
	files [nClasses][nKinds][]byte // class, kind: map file contents
	paths [nClasses][nKinds]string // where they go (routeMapFiles)
	// entries are the exact and prefix files' lines as words, which a
	// routes-only change turns into runtime commands (mapupdate.go).
	entries [nClasses][kindRegex][]mapEntry
	exact   [nClasses]bool // class has Exact entries
	root    [nClasses]bool // class has a catch-all
	any     encode.Word    // value of the catch-all with no host, if root[classAny]
	reject  bool           // some value is rejectValue
	status  []int          // the statusValues some value is, sorted
	// grouped says which classes have groups; match is their stage 2.
	grouped [nClasses]bool
	match   *matchMaps
	// levels are the label counts of the suffix class's suffixes, most
	// first: one round of lookups each (suffixLevel).
	levels []int
	// regexHosts are the hosts of each class's regular-expression
	// routes, once each (their kindRegexHosts file).
	regexHosts [nClasses]map[string]bool
}

// hasRegex: some class has regular-expression routes.
func (t *routeTable) hasRegex() bool {
	for class := range t.files {
		if len(t.files[class][kindRegex]) > 0 {
			return true
		}
	}
	return false
}

// mappable reports whether policies, in their order, are what the
// lookups decide: each one a route, sorted by before.
func mappable(ps []policyView) bool {
	for i, p := range ps {
		if !p.mappable || (i > 0 && before(ps[i-1].route, p.route) > 0) {
			return false
		}
	}
	return true
}

// buildRoutes fills the maps. The first policy with a key keeps it,
// as the first matching ACL rule did; a key whose policies test a method,
// header or query maps to its group (matches.go). nil, with no error,
// when stage 2 cannot decide as the policies do: the ACL rules stay.
func buildRoutes(uuid string, ps []policyView) (*routeTable, error) {
	t := &routeTable{}
	entries, err := routeEntries(uuid, ps, t)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		value := e.plain
		if len(e.conds) > 0 {
			e.group = groupID(e)
			value, t.grouped[e.r.class] = e.group, true
		}
		if e.anyRoot {
			t.root[classAny], t.any = true, value
			continue
		}
		line, err := encode.MapLine(e.key, value)
		if err != nil {
			return nil, err
		}
		t.files[e.r.class][e.kind] = append(t.files[e.r.class][e.kind], line...)
		me := mapEntry{key: e.key, value: value}
		if len(e.conds) == 0 {
			me.pool = e.plainPool
		}
		t.entries[e.r.class][e.kind] = append(t.entries[e.r.class][e.kind], me)
		if n := strings.Count(e.r.host, ".") + 1; e.r.class == classSuffix && !slices.Contains(t.levels, n) {
			t.levels = append(t.levels, n)
		}
	}
	slices.Sort(t.levels)
	slices.Reverse(t.levels)
	if t.grouped != [nClasses]bool{} {
		m, err := buildMatches(entries)
		if err != nil || m == nil {
			return nil, err
		}
		t.match = m
	}
	return t, nil
}

// routeEntries collects the stage-1 keys in the order of their first
// policy, each with its policies; regular-expression routes go to their
// map_reg file, in policy order.
func routeEntries(uuid string, ps []policyView, t *routeTable) ([]*entry, error) {
	byID := map[string]*entry{}
	var out []*entry
	for _, p := range ps {
		value := rejectValue
		switch {
		case p.reject:
			t.reject = true
		case p.status != 0:
			value = statusValue(p.status)
			if !slices.Contains(t.status, p.status) {
				t.status = append(t.status, p.status)
				slices.Sort(t.status)
			}
		default:
			if value = backendName(uuid, p.pool); p.profile != nil {
				value = profileValue(value, p.profile)
			}
		}
		r := p.route
		if r.regex {
			if err := addRegexRoute(t, r, value); err != nil {
				return nil, err
			}
			continue
		}
		kind, id, anyRoot := 0, "any", false
		var key encode.Word
		switch {
		case !r.exact && r.path == "" && r.class == classAny:
			anyRoot = true
		case !r.exact && r.path == "":
			t.root[r.class] = true
		case r.exact:
			t.exact[r.class] = true
		default:
			kind = 1
		}
		if !anyRoot {
			key = encode.RouteKey(r.host, r.path)
			id = classNames[r.class] + string(rune('0'+kind)) + key.String()
		}
		e := byID[id]
		if e == nil {
			e = &entry{r: r, kind: kind, anyRoot: anyRoot, key: key}
			e.r.conds = nil
			byID[id] = e
			out = append(out, e)
		}
		switch {
		case e.hasPlain: // the plain policy before matches all this one would
		case len(r.conds) == 0:
			e.plain, e.hasPlain = value, true
			if !p.reject && p.status == 0 && p.profile == nil {
				e.plainPool = p.pool // the value is the pool's backend name
			}
		default:
			e.conds = append(e.conds, matchPolicy{conds: r.conds, value: value})
		}
	}
	return out, nil
}

// mapName is the table name of a class and kind in layout.RouteMap.
func mapName(class hostClass, kind int) string {
	return classNames[class] + [...]string{".exact", ".prefix", ".regex", ".rxhosts"}[kind]
}

// MapFile is one routing map to write beside the fragment.
type MapFile struct {
	Path string
	Data []byte
}

// routeMapFiles names every map file the listeners reference by its
// digest (as the crt-list: a new map never overwrites one the last good
// configuration reads), records the paths for writeRoutes and lists them.
func routeMapFiles(v *view, at layout.LB) ([]MapFile, error) {
	var out []MapFile
	for _, l := range v.listeners {
		if l.routes == nil {
			continue
		}
		for c := classHost; c <= classAny; c++ {
			for kind := range nKinds {
				data := l.routes.files[c][kind]
				if len(data) == 0 {
					continue
				}
				sum := sha256.Sum256(data)
				path, err := at.RouteMap(l.port, mapName(c, kind), hex.EncodeToString(sum[:]))
				if err != nil {
					return nil, err
				}
				l.routes.paths[c][kind] = path
				out = append(out, MapFile{Path: path, Data: data})
			}
		}
		if m := l.routes.match; m != nil {
			files, err := matchMapFiles(m, l.port, at)
			if err != nil {
				return nil, err
			}
			out = append(out, files...)
		}
	}
	return out, nil
}

var (
	routedACL = encode.Lit("pier_routed")
	routeVar  = encode.Lit("set-var(txn.pier_be)")
)

// writeRoutes emits the lookups of a mapped listener (see the top of
// this file), then the reject rule and the one use_backend.
func writeRoutes(c *encode.Config, l *listenerView, at layout.LB) {
	t := l.routes
	needPath := false
	for class := range t.files {
		needPath = needPath || t.exact[class] || len(t.files[class][1]) > 0
	}
	if needPath { // a host's catch-all alone needs no path key
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_path)"), encode.Lit("path,concat(/)"))
	}
	if t.hasRegex() { // the regex key's path, without the "/" appended
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_rpath)"), encode.Lit("path"))
	}
	c.Line(encode.Lit("acl"), routedACL, encode.Lit("var(txn.pier_be)"), encode.Lit("-m"), encode.Lit("found"))
	first := true
	lookup := func(expr encode.Word, cond ...encode.Word) {
		words := []encode.Word{httpRequest, routeVar, expr}
		if !first {
			cond = append([]encode.Word{encode.Lit("!pier_routed")}, cond...)
		}
		if len(cond) > 0 {
			words = append(append(words, ifWord), cond...)
		}
		first = false
		c.Line(words...)
	}
	keys := [nClasses]encode.Word{encode.Lit("var(txn.pier_host),concat(,txn.pier_path)"),
		encode.Lit("var(txn.pier_hwild),concat(,txn.pier_path)"), encode.Lit("var(txn.pier_hsuf),concat(,txn.pier_path)"),
		encode.Lit("var(txn.pier_path)")}
	hosts := [3]encode.Word{encode.Lit("var(txn.pier_host)"), encode.Lit("var(txn.pier_hwild)"), encode.Lit("var(txn.pier_hsuf)")}
	for class := classHost; class <= classAny; class++ {
		rounds := 1
		if class == classSuffix {
			rounds = len(t.levels)
		}
		for round := range rounds {
			if class == classSuffix {
				suffixLevel(c, t.levels[round])
				first = false
			}
			classLookups(c, t, class, lookup, keys[class], hosts)
		}
	}
	if len(l.profiles) > 0 {
		writeProfileSplit(c)
	}
	if t.reject {
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(403),
			ifWord, openBrace, encode.Lit("var(txn.pier_be)"), encode.Lit("-m"), encode.Lit("str"), rejectValue, closeBrace)
	}
	for _, status := range t.status {
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(status),
			ifWord, openBrace, encode.Lit("var(txn.pier_be)"), encode.Lit("-m"), encode.Lit("str"), statusValue(status), closeBrace)
	}
	writeProfiles(c, l.profiles)
	writeFallbackBackend(c, l.profiles)
	writeCanaryBackend(c, l.profiles)
	writeSplitBackend(c, l.profiles)
	c.Line(encode.Lit("use_backend"), encode.Lit("%[var(txn.pier_be)]"), ifWord, routedACL)
}

// classLookups are the lookups of one class (of one suffix level), then
// its groups' stage 2.
func classLookups(c *encode.Config, t *routeTable, class hostClass, lookup func(encode.Word, ...encode.Word), key encode.Word, hosts [3]encode.Word) {
	file := func(kind int) encode.Word { return encode.FilePath(t.paths[class][kind]) }
	if t.exact[class] {
		lookup(encode.Concat(key, encode.Lit(",map_str("), file(0), encode.Lit(")")))
	}
	if len(t.files[class][kindRegex]) > 0 {
		regexLookup(class, lookup, file, hosts)
	}
	if len(t.files[class][1]) > 0 {
		lookup(encode.Concat(key, encode.Lit(",map_beg("), file(1), encode.Lit(")")))
	}
	switch {
	case t.root[class] && class == classAny:
		lookup(encode.Concat(encode.Lit("str("), t.any, encode.Lit(")")))
	case t.root[class]:
		lookup(encode.Concat(hosts[class], encode.Lit(",map_str("), file(0), encode.Lit(")")))
	}
	if t.grouped[class] {
		writeMatches(c, t.match, class)
	}
}

// suffixLevel sets txn.pier_hsuf to the request host's last n labels
// when more labels precede them ("a.b.foo.com", 2: "foo.com"), the key
// the suffix class's entries for "*.foo.com" have. Levels run most labels
// first, so the longest suffix wins, as the Gateway API asks; a host
// with more than n labels has more than every later n, so a value set by
// an earlier level is always replaced.
func suffixLevel(c *encode.Config, n int) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_hsuf)"),
		encode.Concat(encode.Lit("var(txn.pier_host),field(-1,.,"), encode.Num(n), encode.Lit(")")),
		ifWord, unrouted, openBrace, encode.Concat(encode.Lit("var(txn.pier_host),field(-"), encode.Num(n+1), encode.Lit(",.)")),
		encode.Lit("-m"), encode.Lit("found"), closeBrace)
}
