package annotation

import (
	"fmt"
	"strings"

	"pier.dev/pier/internal/encode"
)

// The prefix-strip idiom of ingress-nginx, the capture-group form pier
// routes without a regular expression: paths "P(/|$)(.*)" with
// rewrite-target "T$2" send /P/rest to the backend as T + rest (and /P
// as T). As a regular expression, ^P(/|$)(.*) matches exactly the paths
// pathType Prefix P matches (P itself, or P then "/"); pier routes it as
// that Prefix path and rewrites with replace-path ^P(/|$)(.*) T\2. Other
// paths of a use-regex Ingress, or of one whose target names groups,
// are PATH REGEX rules (translate's routePath).
const (
	StripSuffix = "(/|$)(.*)"
	TailGroup   = "$2"
)

// parseRewriteTarget accepts what ingress-nginx's rewrite-target becomes:
// without capture groups, the path every request of the route is sent
// to the backend with (ingress-nginx: rewrite "(?i)<path>" <target>
// break, which replaces the whole path and keeps the query string), an
// absolute path of letters, digits and ._~/- only; with capture groups,
// such a path holding $1 to $9 (groups is the highest N, which every
// path of the Ingress must have). tail says the target may be the
// prefix-strip form, <path ending with />$2 with no other group, whose
// paths parseStripPath checks.
func parseRewriteTarget(v string) (target string, tail bool, groups int, err error) {
	if !strings.Contains(v, "$") {
		t, err := PlainPath("rewrite-target", v)
		return t, false, 0, err
	}
	if _, err := encode.RegexTarget(v, encode.MaxPathRegexGroups); err != nil {
		return "", false, 0, fmt.Errorf("rewrite-target %s: a path of letters, digits and ._~/- with capture groups $1 to $9: %w",
			QuoteForMessage(v), err)
	}
	for i := 0; i+1 < len(v); i++ {
		if v[i] == '$' {
			groups = max(groups, int(v[i+1]-'0'))
		}
	}
	t, ok := strings.CutSuffix(v, TailGroup)
	return v, ok && !strings.Contains(t, "$") && strings.HasSuffix(t, "/"), groups, nil
}

// rewriteDifference is how rewrite-target differs from ingress-nginx.
const rewriteDifference = "without use-regex or $1-$9 the path is matched as its pathType says (case-sensitive, Prefix by path element), " +
	"and a path holding regular-expression characters refuses the Ingress; with them paths are case-sensitive regular expressions " +
	"of a subset read alike by RE2 and PCRE2 (docs/migration.md), $N needs N capture groups in every path, and the prefix-strip form " +
	"(paths <prefix>(/|$)(.*) with <path>/$2) is routed as Prefix <prefix>"
