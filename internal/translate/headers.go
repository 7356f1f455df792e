package translate

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// pier's typed header annotations: the alternative to ingress-nginx's
// configuration-snippet (more_set_headers, proxy_set_header).
const (
	// AnnotationRequestHeaders changes the headers of the requests of the
	// Ingress's routes before they reach the backend.
	AnnotationRequestHeaders = AnnotationPrefix + "request-headers"
	// AnnotationResponseHeaders changes the headers of the backend's
	// responses.
	AnnotationResponseHeaders = AnnotationPrefix + "response-headers"
)

// maxHeaderLines bounds one header annotation (and one custom-headers
// ConfigMap): HAProxy's rule list per profile stays short, and the
// render allows 64 changes per direction.
const maxHeaderLines = 32

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
			return nil, fmt.Errorf("%s line %d: header %s appears twice", what, i+1, quoteForMessage(op.Name))
		}
		seen[key] = true
		if ops = append(ops, op); len(ops) > maxHeaderLines {
			return nil, fmt.Errorf("%s: more than %d headers", what, maxHeaderLines)
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
		return model.HeaderOp{}, fmt.Errorf("%s: expected \"Name: value\" or \"-Name\"", quoteForMessage(line))
	}
	return headerSet(name, strings.TrimPrefix(value, " "))
}

// headerSet validates one header to set: a name pier may change and a
// value of printable ASCII without \ or $, and not holding both single
// and double quotes (encode.HeaderSetValue).
func headerSet(name, value string) (model.HeaderOp, error) {
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

// resolveCustomHeaders reads custom-headers' ConfigMap: each data entry
// is a header set on the responses of the Ingress's routes, in key
// order, before pier.dev/response-headers (which may override one).
func (p *parsedIngress) resolveCustomHeaders(x *index) (string, error) {
	s := &p.settings
	if s.customHeaders == "" {
		return "", nil
	}
	key := annotation.KeyOf(p.ing.Annotations, "custom-headers")
	refs := annotation.ConfigMaps(p.ing)
	if len(refs) == 0 {
		return key, fmt.Errorf("custom-headers %s: ConfigMaps of other namespaces cannot be referenced", quoteForMessage(s.customHeaders))
	}
	cm := x.snap.ConfigMap(refs[0].Namespace, refs[0].Name)
	if cm == nil {
		return key, fmt.Errorf("ConfigMap %s not found", quoteForMessage(refs[0].Namespace+"/"+refs[0].Name))
	}
	ops, err := configMapHeaders(cm)
	if err != nil {
		return key, err
	}
	s.responseHeaders = mergeHeaderOps(append(ops, s.responseHeaders...))
	return "", nil
}

// configMapHeaders are a ConfigMap's data entries as headers to set.
func configMapHeaders(cm *corev1.ConfigMap) ([]model.HeaderOp, error) {
	if len(cm.BinaryData) > 0 {
		return nil, errors.New("the ConfigMap has binaryData: header values must be text under data")
	}
	if len(cm.Data) > maxHeaderLines {
		return nil, fmt.Errorf("the ConfigMap has %d entries, the limit is %d", len(cm.Data), maxHeaderLines)
	}
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ops := make([]model.HeaderOp, 0, len(keys))
	for _, k := range keys {
		op, err := headerSet(k, cm.Data[k])
		if err != nil {
			return nil, fmt.Errorf("ConfigMap key %s: %w", quoteForMessage(k), err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// mergeHeaderOps drops a set or remove of a header that a later
// change of the same name overrides, so custom-headers and
// pier.dev/response-headers together render each name once.
func mergeHeaderOps(ops []model.HeaderOp) []model.HeaderOp {
	last := map[string]int{}
	for i, op := range ops {
		last[strings.ToLower(op.Name)] = i
	}
	var out []model.HeaderOp
	for i, op := range ops {
		if last[strings.ToLower(op.Name)] == i {
			out = append(out, op)
		}
	}
	return out
}
