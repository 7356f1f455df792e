package fuzz

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// rendered is what the agent would write for one LoadBalancer.
type rendered struct {
	cfg, crt []byte
	maps     []render.MapFile
	err      error
}

// vip stands in for IPAM: every LoadBalancer gets the same VIP, so the
// victim's file does not depend on which other LoadBalancers exist.
const vip = "10.0.0.1"

// renderAll renders every LoadBalancer as the agent would, after IPAM has
// granted the VIP and, when one is pinned, the requested floating IP
// (which is user-derived, so it goes through the renderer too).
func renderAll(res *translate.Result) map[string]rendered {
	out := map[string]rendered{}
	for _, orig := range res.LoadBalancers {
		lb := *orig // the renderer reads only; a shallow copy keeps res intact
		lb.VIP, lb.FIP = vip, lb.RequestedFIP
		opts := render.Options{Dir: "/var/lib/pier/haproxy/" + lb.UUID}
		var r rendered
		r.cfg, r.err = render.Config(&lb, opts)
		if r.err == nil {
			r.crt, r.err = render.CrtList(&lb, opts)
		}
		if r.err == nil {
			r.maps, r.err = render.Maps(&lb, opts)
		}
		out[lb.UUID] = r
	}
	return out
}

// checkLines holds the line-level property for a rendered haproxy.conf:
// one LF-terminated line per emitted line, no CR or NUL, and every line
// tokenises under the model of HAProxy's parser into at most 64 words
// with no comment, escape, truncation or variable lookup. The two header
// lines are the only comments; they hold constants and the UUID only.
func checkLines(t testing.TB, cfg []byte) [][]string {
	t.Helper()
	text := string(cfg)
	if !strings.HasSuffix(text, "\n") || strings.ContainsAny(text, "\r\x00") {
		t.Fatalf("config is not plain LF-terminated lines: %s", encode.Printable(text))
	}
	var lookups []string
	getenv := func(name string) (string, bool) {
		lookups = append(lookups, name)
		return "", false
	}
	var lines [][]string
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "" {
			continue
		}
		toks, err := encode.Tokenize(line, getenv)
		// Config joins global.conf, process.conf and the fragment: each
		// opens with pier's own header comments, and no other line may be
		// a comment.
		header := strings.HasPrefix(line, "# pier ") || line == "# generated; do not edit"
		switch {
		case err != nil:
			t.Fatalf("line %d %s: %v", i+1, encode.Printable(line), err)
		case len(lookups) > 0:
			t.Fatalf("line %d %s: looks up variables %q", i+1, encode.Printable(line), lookups)
		case toks.Escape || toks.Truncated || toks.Scope || toks.Env:
			t.Fatalf("line %d %s: interpreted %+v", i+1, encode.Printable(line), toks)
		case toks.Comment != header:
			t.Fatalf("line %d %s: comment=%v", i+1, encode.Printable(line), toks.Comment)
		case len(toks.Words) > encode.MaxLineArgs:
			t.Fatalf("line %d: %d words", i+1, len(toks.Words))
		}
		if len(toks.Words) > 0 { // the header comments have none
			lines = append(lines, toks.Words)
		}
	}
	return lines
}

// aclWant is one acl line a rule must produce: "acl <name> <fetch> -m
// <match> <value>", the value as exactly one word.
type aclWant struct{ fetch, match, value string }

func rulesWant(r model.L7Rule) []aclWant {
	switch {
	case r.Type == model.RuleHostName && r.Compare == model.CompareEqualTo:
		return []aclWant{{"var(txn.pier_host)", "str", r.Value}}
	case r.Type == model.RuleHostName && r.Compare == model.CompareWildcard:
		return []aclWant{{"var(txn.pier_hwild)", "str", r.Value}}
	case r.Type == model.RulePath && r.Compare == model.CompareEqualTo:
		return []aclWant{{"path", "str", r.Value}}
	case r.Type == model.RulePath && r.Compare == model.CompareStartsWith && r.Value != "/":
		return []aclWant{{"path", "str", r.Value}, {"path", "beg", r.Value + "/"}}
	case r.Type == model.RulePath && r.Compare == model.CompareRegex:
		// HAProxy gets the expression re-written from Go's parse tree.
		re, err := encode.ParsePathRegex(r.Value)
		if err != nil {
			return []aclWant{{"path", "reg", "(refused: " + err.Error() + ")"}}
		}
		return []aclWant{{"path", "reg", re.String()}}
	}
	return nil // "/" prefix: always_true, no value to carry
}

// checkConfig holds checkLines and, for every host and path the model
// holds, an acl line carrying it intact as its sixth and last word, or a
// routing-map line carrying it intact as its key (checkMaps).
func checkConfig(t testing.TB, cfg []byte, maps []render.MapFile, lb *model.LoadBalancer) {
	t.Helper()
	byValue := map[string][][]string{}
	for _, words := range checkLines(t, cfg) {
		if words[0] == "acl" {
			byValue[words[len(words)-1]] = append(byValue[words[len(words)-1]], words)
		}
	}
	keys := checkMaps(t, maps)
	for _, l := range lb.Listeners {
		for _, p := range l.Policies {
			if key, ok := mapKeyWant(p); ok && keys[key] {
				continue
			}
			for _, r := range p.Rules {
				for _, w := range rulesWant(r) {
					if !slices.ContainsFunc(byValue[w.value], func(ws []string) bool {
						return len(ws) == 6 && ws[2] == w.fetch && ws[3] == "-m" && ws[4] == w.match
					}) {
						t.Fatalf("no acl line or map key carries %s %s intact; acl lines: %q, %d map keys", r.Type, encode.Printable(w.value), byValue, len(keys))
					}
				}
			}
		}
	}
}

// checkMaps: every line of a routing map is "<key> <value>\n", two words
// of printable ASCII, the key not a comment. It returns the keys.
func checkMaps(t testing.TB, maps []render.MapFile) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, m := range maps {
		text := string(m.Data)
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			words := strings.Split(line, " ")
			ok := len(words) == 2 && words[0] != "" && words[0][0] != '#' &&
				(strings.HasPrefix(words[1], "be_") || words[1] == "pier_reject" || words[1] == "pier_regex")
			for i := 0; ok && i < len(line); i++ {
				ok = line[i] > ' ' && line[i] < 0x7f || line[i] == ' '
			}
			if !ok {
				t.Fatalf("map %s: line %s", m.Path, encode.Printable(line))
			}
			keys[words[0]] = true
		}
	}
	return keys
}

// mapKeyWant is the map key a translated policy has (render's routes.go):
// host + path + "/", or the host alone for its Prefix "/". A host-less
// Prefix "/" has no key.
func mapKeyWant(p model.L7Policy) (string, bool) {
	var host, path string
	exact := false
	for _, r := range p.Rules {
		switch r.Type {
		case model.RuleHostName:
			host = r.Value
		case model.RulePath:
			path, exact = r.Value, r.Compare == model.CompareEqualTo
		}
	}
	for _, r := range p.Rules {
		if r.Type == model.RulePath && r.Compare == model.CompareRegex {
			// A map_reg key: "^", the host escaped, the re-written
			// expression after its "^".
			re, err := encode.ParsePathRegex(r.Value)
			if err != nil {
				return "", false
			}
			return encode.RegexRouteKey(host, re).String(), true
		}
	}
	if !exact && path == "/" {
		return host, host != ""
	}
	return host + path + "/", true
}

// checkCrtList: one line per certificate, "<file> <host>...", the hosts
// as single words and equal to the model's.
func checkCrtList(t testing.TB, crt []byte, lb *model.LoadBalancer) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(crt), "\n"), "\n")
	var certs []model.Certificate
	for _, l := range lb.Listeners {
		for _, c := range l.Certificates {
			if !slices.ContainsFunc(certs, func(o model.Certificate) bool { return o.ID == c.ID }) {
				certs = append(certs, c)
			}
		}
	}
	if len(certs) == 0 {
		if len(crt) != 0 {
			t.Fatalf("crt-list without certificates: %s", encode.Printable(string(crt)))
		}
		return
	}
	if len(lines) != len(certs) || strings.ContainsAny(string(crt), "\r\x00#[!'\"") {
		t.Fatalf("crt-list %s for %d certificates", encode.Printable(string(crt)), len(certs))
	}
	for i, c := range certs {
		words := strings.Split(lines[i], " ")
		if !slices.Equal(words[1:], c.Hosts) {
			t.Fatalf("crt-list line %s, want hosts %q", encode.Printable(lines[i]), c.Hosts)
		}
	}
}

// checkProblems: every message and field path is printable as it is, so
// it can go into an Event or a log line.
func checkProblems(t testing.TB, ps []model.Problem) {
	t.Helper()
	for _, p := range ps {
		for _, s := range []string{p.Message, p.Field, p.Reason} {
			if bad, at := unsafeText(s); bad {
				t.Fatalf("problem %s/%s %s: unsafe character at byte %d: %s", p.Namespace, p.Name, p.Reason, at, encode.Printable(s))
			}
		}
		if p.Message == "" {
			t.Fatalf("problem %+v without a message", p)
		}
	}
}

// unsafeText reports control characters (C0, DEL, C1), invalid UTF-8 and
// format characters (bidi overrides, zero-width) in s.
func unsafeText(s string) (bool, int) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return true, i
			}
		case r < 0x20, r >= 0x7f && r < 0xa0, unicode.Is(unicode.Cf, r):
			return true, i
		}
	}
	return false, 0
}
