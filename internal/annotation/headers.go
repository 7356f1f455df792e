package annotation

import (
	"fmt"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// pier's typed header annotations: the alternative to ingress-nginx's
// configuration-snippet (more_set_headers, proxy_set_header).
const (
	// RequestHeaders changes the headers of the requests of the
	// Ingress's routes before they reach the backend.
	RequestHeaders = Prefix + "request-headers"
	// ResponseHeaders changes the headers of the backend's
	// responses.
	ResponseHeaders = Prefix + "response-headers"
)

// MaxHeaderLines bounds one header annotation (and one custom-headers
// ConfigMap): HAProxy's rule list per profile stays short, and the
// render allows 64 changes per direction.
const MaxHeaderLines = 32

// maxHeaderAnnotation bounds a header annotation's value: more than the
// 1 KiB of other annotations, as a Content-Security-Policy line alone
// is often longer.
const maxHeaderAnnotation = 16 << 10

// parseHeaderLines reads pier.dev/request-headers or -response-headers:
// one change per line (a YAML block scalar, "|"), "Name: value" to set
// the header (replacing every line of it) or "-Name" to remove it.
// Blank lines are skipped; a name may appear once; CR, tabs and other
// control bytes are refused, so a value cannot start another header.
func parseHeaderLines(what, v string) ([]model.HeaderOp, error) {
	var ops []model.HeaderOp
	seen := map[string]bool{}
	for i, line := range strings.Split(v, "\n") {
		if line == "" {
			continue
		}
		op, err := parseHeaderLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", what, i+1, err)
		}
		key := strings.ToLower(op.Name)
		if seen[key] {
			return nil, fmt.Errorf("%s line %d: header %s appears twice", what, i+1, QuoteForMessage(op.Name))
		}
		seen[key] = true
		if ops = append(ops, op); len(ops) > MaxHeaderLines {
			return nil, fmt.Errorf("%s: more than %d headers", what, MaxHeaderLines)
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%s: no header (write one \"Name: value\" or \"-Name\" per line)", what)
	}
	return ops, nil
}

func parseHeaderLine(line string) (model.HeaderOp, error) {
	if name, ok := strings.CutPrefix(line, "-"); ok {
		n, err := encode.ModifiableHeader(name)
		if err != nil {
			return model.HeaderOp{}, err
		}
		return model.HeaderOp{Op: model.HeaderRemove, Name: n.String()}, nil
	}
	name, value, ok := strings.Cut(line, ":")
	if !ok {
		return model.HeaderOp{}, fmt.Errorf("%s: expected \"Name: value\" or \"-Name\"", QuoteForMessage(line))
	}
	return HeaderSet(name, strings.TrimPrefix(value, " "))
}

// HeaderSet validates one header to set: a name pier may change and a
// value of printable ASCII without \ or $, and not holding both single
// and double quotes (encode.HeaderSetValue).
func HeaderSet(name, value string) (model.HeaderOp, error) {
	n, err := encode.ModifiableHeader(name)
	if err != nil {
		return model.HeaderOp{}, err
	}
	val, err := encode.HeaderSetValue(value)
	if err != nil {
		return model.HeaderOp{}, fmt.Errorf("header %s: %w", n.String(), err)
	}
	return model.HeaderOp{Op: model.HeaderSet, Name: n.String(), Value: val.String()}, nil
}

// parseCustomHeaders accepts custom-headers: a ConfigMap name, or
// "namespace/name" (parseObjectName; only the Ingress's own namespace is
// read, as ingress-nginx documents).
func parseCustomHeaders(v string) (string, error) { return parseObjectName("custom-headers", v) }
