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
