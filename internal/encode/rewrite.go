package encode

import "strings"

// plainPathChars are the bytes of a plain path: letters, digits and
// ._~/- (rewrite-target, x-forwarded-prefix, app-root).
const plainPathChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~/-"

// plainPath checks an absolute path of letters, digits and ._~/- that
// Path accepts as Exact (no "//", "/./", "/../").
func plainPath(kind, s string) error {
	if _, err := Path(s, PathExact); err != nil {
		return err
	}
	if strings.Trim(s, plainPathChars) != "" {
		return refuse(kind, "charset", s, "holds more than letters, digits and ._~/-")
	}
	return nil
}

// StripPrefixRegex makes the regular expression ^P(/|$)(.*) of
// ingress-nginx's prefix-strip idiom (path "P(/|$)(.*)", rewrite-target
// "T$2") for a plain path P other than "/" and not ending with "/": the
// second group is what follows P and its "/". The only regex
// metacharacter a plain path holds, ".", is escaped, so the expression
// matches P literally, in PCRE2 (HAProxy) as in RE2. Single-quoted:
// nothing in it is interpreted by the config parser.
func StripPrefixRegex(prefix string) (Word, error) {
	if err := plainPath("strip prefix", prefix); err != nil {
		return Word{}, err
	}
	if prefix == "/" || strings.HasSuffix(prefix, "/") {
		return Word{}, refuse("strip prefix", "syntax", prefix, "must not be / or end with /")
	}
	return Word{s: "^" + strings.ReplaceAll(prefix, ".", `\.`) + "(/|$)(.*)", kind: kindUser, quote: true}, nil
}

// TailRewrite makes the replacement T\2 for StripPrefixRegex (a
// log-format argument of replace-path, where \2 is the second group): T
// is a plain path ending with "/". No "%", so no sample expression.
func TailRewrite(target string) (Word, error) {
	if err := plainPath("rewrite target", target); err != nil {
		return Word{}, err
	}
	if !strings.HasSuffix(target, "/") {
		return Word{}, refuse("rewrite target", "syntax", target, "must end with / before the captured rest")
	}
	return Word{s: target + `\2`, kind: kindUser, quote: true}, nil
}

// RegexTarget makes the replacement of replace-path for rewrite-target
// with capture groups: a path of letters, digits and ._~/- in which $1 to
// $9 stand for groups of the path regex (at most groups), written as \1
// to \9. No "%" (a log-format directive of the replacement) and no other
// "$" or "\". With every $N read as a letter it must be a path Path
// accepts as Exact (no "//", "/./", "/../"). At least one group is
// referenced: a target without groups is set-path's.
func RegexTarget(target string, groups int) (Word, error) {
	const k = "rewrite target"
	var out, plain strings.Builder
	used := false
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c != '$' {
			out.WriteByte(c)
			plain.WriteByte(c)
			continue
		}
		if i+1 == len(target) || target[i+1] < '1' || target[i+1] > '9' {
			return Word{}, refuse(k, "syntax", target, "$ must be followed by a digit 1-9 (a capture group)")
		}
		n := int(target[i+1] - '0')
		if n > groups {
			return Word{}, refuse(k, "groups", target, "$"+itoa(n)+" but the path has "+itoa(groups)+" capture groups")
		}
		out.WriteString(`\` + itoa(n))
		plain.WriteByte('x')
		used = true
		i++
	}
	if !used {
		return Word{}, refuse(k, "syntax", target, "holds no $1-$9")
	}
	if err := plainPath(k, plain.String()); err != nil {
		return Word{}, err
	}
	return Word{s: out.String(), kind: kindUser, quote: true}, nil
}
