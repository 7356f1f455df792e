package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// Header, query-parameter and method matches (HTTPRoute) in two stages,
// so that a request's cost does not grow with the number of routes
// (docs/gateway-api.md, gap 1):
//
// Stage 1 is routes.go's lookups, unchanged, except that a key whose
// policies test more than host and path maps to a group id ("pier_g" and
// 16 hex digits) instead of a backend: the key's *group*.
//
// Stage 2 runs after the lookups of each host class that has groups. The
// conditioned policies of every group are sorted into *shapes*, the set
// of attributes they test (method, header names, query names); one map
// file per shape, keyed by the group id followed by the upper-case hex
// SHA-1 of each attribute's value. HAProxy computes the request's side
// with "<fetch>,sha1,hex" into txn.pier_a<i>, one variable per attribute
// of the listener, set only when the header or parameter is present (an
// absent header is not an empty one); any value becomes a key of fixed
// length with no space or '#'. One lookup per shape, in precedence order
// (a method first, more headers, more query parameters), each only while
// unrouted: the rule count grows with the distinct shapes, not routes.
//
// Fall-through: when no shape matches, the request takes the next
// candidate of its class, a shorter prefix of the same host, then the
// host's catch-all. That candidate is fixed by the key, so it is
// precomputed: a group's list holds its own policies, then those of the
// candidates below it (their shapes inherited) until one has a plain
// policy, whose value is the group's default (a map of its own). With
// no default, the request goes on to the next class's lookups, which
// depend on the request's path and so cannot be precomputed.
//
// A single order of shapes must give every group its first matching
// policy. Where it cannot (two policies of a group, tied or inherited, in
// the opposite order of their shapes, and one request able to match both),
// the listener keeps the ACL rules, which are always first match wins.

// cond is one method, header or query-parameter rule of a policy.
type cond struct {
	typ   model.RuleType
	key   string // header name (lowercase) or query name; "" for a method
	value string
}

func isCond(r model.L7Rule) bool {
	return r.Compare == model.CompareEqualTo &&
		(r.Type == model.RuleMethod || r.Type == model.RuleHeader || r.Type == model.RuleQuery)
}

var condRank = map[model.RuleType]int{model.RuleMethod: 0, model.RuleHeader: 1, model.RuleQuery: 2}

// sortConds puts conds in attribute order (method, headers, queries, by
// name); false when an attribute is tested twice, which the maps do not
// express (translate keeps the first rule of a name).
func sortConds(cs []cond) bool {
	for i := range cs {
		if cs[i].typ == model.RuleHeader {
			cs[i].key = strings.ToLower(cs[i].key)
		}
	}
	slices.SortFunc(cs, func(a, b cond) int {
		return cmp.Or(cmp.Compare(condRank[a.typ], condRank[b.typ]), cmp.Compare(a.key, b.key))
	})
	for i := 1; i < len(cs); i++ {
		if cs[i].typ == cs[i-1].typ && cs[i].key == cs[i-1].key {
			return false
		}
	}
	return true
}

func condCounts(cs []cond) (method, headers, queries int) {
	for _, c := range cs {
		switch c.typ {
		case model.RuleMethod:
			method++
		case model.RuleHeader:
			headers++
		default:
			queries++
		}
	}
	return method, headers, queries
}

// condsBefore is the HTTPRoute precedence among matches of one host and
// path: a method before none, then more headers, then more query
// parameters.
func condsBefore(a, b []cond) int {
	am, ah, aq := condCounts(a)
	bm, bh, bq := condCounts(b)
	return cmp.Or(cmp.Compare(bm, am), cmp.Compare(bh, ah), cmp.Compare(bq, aq))
}

// shapeName names the attributes conds test: "M|h:x-a|q:id".
func shapeName(cs []cond) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = string(c.typ) + ":" + c.key
	}
	return strings.Join(parts, "|")
}

// compatible reports whether one request can match both: every
// attribute both test has the same value.
func compatible(a, b []cond) bool {
	for _, x := range a {
		for _, y := range b {
			if x.typ == y.typ && x.key == y.key && x.value != y.value {
				return false
			}
		}
	}
	return true
}

// entry is one stage-1 key and the policies that share it, in order.
type entry struct {
	r        route // the key's class, host and path; conds unused
	kind     int   // 0 exact file, 1 prefix file
	anyRoot  bool  // the catch-all with no host (a constant)
	key      encode.Word
	group    encode.Word // group id, when conds
	conds    []matchPolicy
	plain    encode.Word // value of the first policy without conds
	hasPlain bool
	// plainPool is the pool whose backend name plain is, or "".
	plainPool string
}

// matchPolicy is a conditioned policy: its conds and its map value.
type matchPolicy struct {
	conds []cond
	value encode.Word
}

type entryKey struct {
	class hostClass
	host  string
	kind  int
	path  string
}

func (e *entry) index() entryKey { return entryKey{e.r.class, e.r.host, e.kind, e.r.path} }

func groupID(e *entry) encode.Word {
	sum := sha256.Sum256([]byte(classNames[e.r.class] + strconv.Itoa(e.kind) + "\x00" + e.r.host + "\x00" + e.r.path))
	return encode.ID("pier_g", hex.EncodeToString(sum[:8]))
}

// fallThrough lists the entries a request of e's key meets next in its
// class, best first: the prefixes of the same host covering e's path
// element-wise (longest first; an Exact path's own prefix included),
// then the host's catch-all.
func fallThrough(e *entry, idx map[entryKey]*entry) []*entry {
	r := e.r
	if !r.exact && r.path == "" {
		return nil
	}
	var out []*entry
	add := func(k entryKey) {
		if c := idx[k]; c != nil {
			out = append(out, c)
		}
	}
	if r.exact && !strings.HasSuffix(r.path, "/") {
		add(entryKey{r.class, r.host, 1, r.path})
	}
	for i := len(r.path) - 1; i > 0; i-- {
		if r.path[i] == '/' {
			add(entryKey{r.class, r.host, 1, r.path[:i]})
		}
	}
	add(entryKey{r.class, r.host, 0, ""})
	return out
}

// shape is one map file of stage 2.
type shape struct {
	conds   []cond // a representative policy's, for order and attributes
	attrs   []int  // indexes into matchMaps.attrs
	file    []byte
	path    string
	classes [nClasses]bool // classes whose groups use it
	seen    map[string]bool
}

// matchMaps is a listener's stage 2.
type matchMaps struct {
	shapes       []*shape // lookup order
	attrs        []cond   // txn.pier_a<i> holds the hash of attrs[i] (value unused)
	defaults     []byte
	defaultsPath string
}

type groupList struct {
	e      *entry
	list   []matchPolicy
	def    encode.Word
	hasDef bool
}

// buildMatches fills stage 2 for entries; nil (and no error) when no
// single order of shapes decides as the policies do.
func buildMatches(es []*entry) (*matchMaps, error) {
	groups, byName := groupLists(es)
	m := &matchMaps{}
	for _, s := range byName {
		m.shapes = append(m.shapes, s)
	}
	slices.SortFunc(m.shapes, func(a, b *shape) int {
		return cmp.Or(condsBefore(a.conds, b.conds), cmp.Compare(shapeName(a.conds), shapeName(b.conds)))
	})
	order := map[string]int{}
	for i, s := range m.shapes {
		order[shapeName(s.conds)] = i
	}
	for _, g := range groups {
		if !orderable(g.list, order) {
			return nil, nil
		}
	}
	attrIndex := map[string]int{}
	for _, s := range m.shapes {
		for _, c := range s.conds {
			name := shapeName([]cond{c})
			i, ok := attrIndex[name]
			if !ok {
				i = len(m.attrs)
				attrIndex[name] = i
				m.attrs = append(m.attrs, cond{typ: c.typ, key: c.key})
			}
			s.attrs = append(s.attrs, i)
		}
	}
	return m, m.fill(groups, byName)
}

// groupLists lists each group's policies with those it inherits, its
// default, and the shapes they use, by name.
func groupLists(es []*entry) ([]groupList, map[string]*shape) {
	idx := map[entryKey]*entry{}
	for _, e := range es {
		idx[e.index()] = e
	}
	byName := map[string]*shape{}
	var groups []groupList
	for _, e := range es {
		if len(e.conds) == 0 {
			continue
		}
		g := groupList{e: e, list: slices.Clone(e.conds), def: e.plain, hasDef: e.hasPlain}
		for _, next := range fallThrough(e, idx) {
			if g.hasDef {
				break
			}
			g.list = append(g.list, next.conds...)
			g.def, g.hasDef = next.plain, next.hasPlain
		}
		for _, p := range g.list {
			s := byName[shapeName(p.conds)]
			if s == nil {
				s = &shape{conds: p.conds, seen: map[string]bool{}}
				byName[shapeName(p.conds)] = s
			}
			s.classes[e.r.class] = true
		}
		groups = append(groups, g)
	}
	return groups, byName
}

// orderable reports whether reading list's shapes in order finds, for
// every request, the first policy of list it matches.
func orderable(list []matchPolicy, order map[string]int) bool {
	for i := range list {
		for j := i + 1; j < len(list); j++ {
			if order[shapeName(list[i].conds)] > order[shapeName(list[j].conds)] && compatible(list[i].conds, list[j].conds) {
				return false
			}
		}
	}
	return true
}

// fill writes the shape maps and the defaults. The first policy of a
// group with a key keeps it, as first match wins.
func (m *matchMaps) fill(groups []groupList, byName map[string]*shape) error {
	for _, g := range groups {
		for _, p := range g.list {
			s := byName[shapeName(p.conds)]
			values := make([]string, len(p.conds))
			for i, c := range p.conds {
				values[i] = c.value
			}
			key := encode.MatchKey(g.e.group, values...)
			if s.seen[key.String()] {
				continue
			}
			s.seen[key.String()] = true
			line, err := encode.MapLine(key, p.value)
			if err != nil {
				return err
			}
			s.file = append(s.file, line...)
		}
		if g.hasDef {
			line, err := encode.MapLine(g.e.group, g.def)
			if err != nil {
				return err
			}
			m.defaults = append(m.defaults, line...)
		}
	}
	return nil
}

var (
	groupVar = encode.Lit("var(txn.pier_grp)")
	unrouted = encode.Lit("!pier_routed")
)

// writeMatches is stage 2 for the groups of class, after its lookups.
func writeMatches(c *encode.Config, m *matchMaps, class hostClass) {
	dashM, found := encode.Lit("-m"), encode.Lit("found")
	pending := []encode.Word{openBrace, groupVar, dashM, found, closeBrace}
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_grp)"), encode.Lit("var(txn.pier_be)"), ifWord,
		openBrace, encode.Lit("var(txn.pier_be)"), dashM, encode.Lit("beg"), encode.Lit("pier_g"), closeBrace)
	c.Line(append([]encode.Word{httpRequest, encode.Lit("unset-var(txn.pier_be)"), ifWord}, pending...)...)
	used := make([]bool, len(m.attrs))
	for _, s := range m.shapes {
		if s.classes[class] {
			for _, i := range s.attrs {
				used[i] = true
			}
		}
	}
	for i, a := range m.attrs {
		if !used[i] {
			continue
		}
		set := encode.Concat(encode.Lit("set-var(txn.pier_a"), encode.Num(i), encode.Lit(")"))
		words := []encode.Word{httpRequest, set}
		switch a.typ {
		case model.RuleMethod:
			words = append(append(words, encode.Lit("method,sha1,hex"), ifWord), pending...)
		default:
			sample := encode.FullHeaderSample(a.key)
			if a.typ == model.RuleQuery {
				sample = encode.QueryParamSample(a.key)
			}
			words = append(append(words, encode.Concat(sample, encode.Lit(",sha1,hex")), ifWord), pending...)
			words = append(words, openBrace, sample, dashM, found, closeBrace)
		}
		c.Line(words...)
	}
	for _, s := range m.shapes {
		if !s.classes[class] {
			continue
		}
		expr := groupVar
		for _, i := range s.attrs {
			expr = encode.Concat(expr, encode.Lit(",concat(,txn.pier_a"), encode.Num(i), encode.Lit(",)"))
		}
		expr = encode.Concat(expr, encode.Lit(",map_str("), encode.FilePath(s.path), encode.Lit(")"))
		c.Line(append(append([]encode.Word{httpRequest, routeVar, expr, ifWord}, pending...), unrouted)...)
	}
	if len(m.defaults) > 0 {
		expr := encode.Concat(groupVar, encode.Lit(",map_str("), encode.FilePath(m.defaultsPath), encode.Lit(")"))
		c.Line(append(append([]encode.Word{httpRequest, routeVar, expr, ifWord}, pending...), unrouted)...)
	}
	c.Line(httpRequest, encode.Lit("unset-var(txn.pier_grp)"))
}

// matchMapFiles names the shape maps and the defaults of a listener by
// their digest, records the paths and lists them.
func matchMapFiles(m *matchMaps, port int, at layout.LB) ([]MapFile, error) {
	var out []MapFile
	add := func(table string, data []byte) (string, error) {
		sum := sha256.Sum256(data)
		path, err := at.RouteMap(port, table, hex.EncodeToString(sum[:]))
		if err != nil {
			return "", err
		}
		out = append(out, MapFile{Path: path, Data: data})
		return path, nil
	}
	var err error
	for i, s := range m.shapes {
		if s.path, err = add("match."+strconv.Itoa(i), s.file); err != nil {
			return nil, err
		}
	}
	if len(m.defaults) > 0 {
		if m.defaultsPath, err = add("match.default", m.defaults); err != nil {
			return nil, err
		}
	}
	return out, nil
}
