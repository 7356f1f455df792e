package translate

import (
	"fmt"
	"strconv"
	"unicode"

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
	q := quoteForMessage(key)
	return "metadata.annotations[" + q[1:len(q)-1] + "]"
}

// quoteForMessage makes a user string safe to show in logs, Events and API
// answers: truncated, and with control, format and bidi characters escaped
// (RELIABILITY R6), so a hostile value cannot forge log lines.
func quoteForMessage(s string) string {
	truncated := false
	if len(s) > maxMessageValue {
		s, truncated = s[:maxMessageValue], true
	}
	out := make([]byte, 0, len(s)+2)
	out = append(out, '"')
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
	out = append(out, '"')
	if truncated {
		out = append(out, "…"...)
	}
	return string(out)
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
