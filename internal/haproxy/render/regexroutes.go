package render

import "pier.dev/pier/internal/encode"

// addRegexRoute adds a regular-expression route to its class's map_reg
// file, keyed by the host then the expression (encode.RegexRouteKey),
// and its host to the class's host list.
func addRegexRoute(t *routeTable, r route, value encode.Word) error {
	re, err := encode.ParsePathRegex(r.path)
	if err != nil {
		return err
	}
	line, err := encode.MapLine(encode.RegexRouteKey(r.host, re), value)
	if err != nil {
		return err
	}
	t.files[r.class][kindRegex] = append(t.files[r.class][kindRegex], line...)
	if r.class == classAny || t.regexHosts[r.class][r.host] {
		return nil
	}
	if t.regexHosts[r.class] == nil {
		t.regexHosts[r.class] = map[string]bool{}
	}
	t.regexHosts[r.class][r.host] = true
	line, err = encode.MapLine(encode.RouteKey(r.host, ""), regexHostValue)
	if err != nil {
		return err
	}
	t.files[r.class][kindRegexHosts] = append(t.files[r.class][kindRegexHosts], line...)
	return nil
}

// regexHostValue is the value of a kindRegexHosts entry (only its
// presence is tested).
var regexHostValue = encode.Lit("pier_regex")

// regexLookup is a class's regular-expression routes: one map_reg lookup
// of the host then the raw path (txn.pier_rpath), only while nothing
// matched, after the class's Exact lookup and before its Prefix one
// (nginx tries its regex locations after the exact ones and before
// falling back to the longest prefix). map_reg returns the first entry
// that matches, in file order: policy order, the longest expression
// first. A host without regular expressions pays one map_str lookup
// (the guard); only a host with them runs the expressions, each failing
// at once on another host's prefix. A listener without regex routes
// renders as before.
func regexLookup(class hostClass, lookup func(encode.Word, ...encode.Word), file func(int) encode.Word, hosts [3]encode.Word) {
	key := encode.Lit("var(txn.pier_rpath)")
	var guard []encode.Word
	if class != classAny {
		key = encode.Concat(hosts[class], encode.Lit(",concat(,txn.pier_rpath)"))
		guard = []encode.Word{openBrace, encode.Concat(hosts[class], encode.Lit(",map_str("), file(kindRegexHosts), encode.Lit(")")),
			encode.Lit("-m"), encode.Lit("found"), closeBrace}
	}
	lookup(encode.Concat(key, encode.Lit(",map_reg("), file(kindRegex), encode.Lit(")")), guard...)
}
