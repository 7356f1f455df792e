package translate

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// fieldForAnnotation names an annotation in a problem's field path, with
// the key escaped: keys from manifest files are not checked by any API
// server and may carry control or bidi characters.
func fieldForAnnotation(key string) string {
	body, truncated := annotation.EscapeForMessage(key)
	if truncated {
		body += "…"
	}
	return "metadata.annotations[" + body + "]"
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
