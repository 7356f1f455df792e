package translate

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
)

// maxMessageValue is how much of an offending value a problem message
// shows: enough to recognise it, not enough to flood Events and logs.
const maxMessageValue = 64

// fieldForAnnotation names an annotation in a problem's field path, with
// the key escaped: keys from manifest files are not checked by any API
// server and may carry control or bidi characters.
func fieldForAnnotation(key string) string {
	body, truncated := escapeForMessage(key)
	if truncated {
		body += "…"
	}
	return "metadata.annotations[" + body + "]"
}

// quoteForMessage makes a user string safe to show in logs, Events and API
// answers: truncated, and with control, format and bidi characters escaped,
// so a hostile value cannot forge log lines.
func quoteForMessage(s string) string {
	body, truncated := escapeForMessage(s)
	if truncated {
		return `"` + body + `"…`
	}
	return `"` + body + `"`
}

// escapeForMessage is quoteForMessage without the quotes. The cut falls
// on a rune boundary: problems reach the API's JSON and Kubernetes
// Events, which want valid UTF-8, and half a character would show as
// \ufffd where the name had none.
func escapeForMessage(s string) (string, bool) {
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

func problem(ing *networkingv1.Ingress, sev model.Severity, reason, field, format string, args ...any) model.Problem {
	return model.Problem{
		Kind:      "Ingress",
		Namespace: ing.Namespace,
		Name:      ing.Name,
		Severity:  sev,
		Reason:    reason,
		Field:     field,
		Message:   fmt.Sprintf(format, args...),
	}
}

// refusal is an Error problem: the whole Ingress is not served.
func refusal(ing *networkingv1.Ingress, reason, field, format string, args ...any) model.Problem {
	return problem(ing, model.SeverityError, reason, field, format, args...)
}

func warning(ing *networkingv1.Ingress, reason, field, format string, args ...any) model.Problem {
	return problem(ing, model.SeverityWarning, reason, field, format, args...)
}
