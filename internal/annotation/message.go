package annotation

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// maxMessageValue is how much of an offending value a problem message
// shows: enough to recognise it, not enough to flood Events and logs.
const maxMessageValue = 64

// QuoteForMessage makes a user string safe to show in logs, Events and API
// answers: truncated, and with control, format and bidi characters escaped,
// so a hostile value cannot forge log lines.
func QuoteForMessage(s string) string {
	body, truncated := EscapeForMessage(s)
	if truncated {
		return `"` + body + `"…`
	}
	return `"` + body + `"`
}

// EscapeForMessage is QuoteForMessage without the quotes. The cut falls
// on a rune boundary: problems reach the API's JSON and Kubernetes
// Events, which want valid UTF-8, and half a character would show as
// \ufffd where the name had none.
func EscapeForMessage(s string) (string, bool) {
	truncated := false
	if len(s) > maxMessageValue {
		// At most UTFMax-1 steps back: invalid input made of
		// continuation bytes is still cut near the limit.
		n := maxMessageValue
		for i := 1; i < utf8.UTFMax && !utf8.RuneStart(s[n]); i++ {
			n--
		}
		s, truncated = s[:n], true
	}
	out := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case r == unicode.ReplacementChar, r < 0x20, r == 0x7f,
			unicode.Is(unicode.Cf, r), r > unicode.MaxASCII && !unicode.IsPrint(r):
			q := strconv.QuoteRuneToASCII(r)
			out = append(out, q[1:len(q)-1]...)
		default:
			out = append(out, string(r)...)
		}
	}
	return string(out), truncated
}
