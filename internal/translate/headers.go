package translate

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// resolveCustomHeaders reads custom-headers' ConfigMap: each data entry
// is a header set on the responses of the Ingress's routes, in key
// order, before pier.dev/response-headers (which may override one).
func (p *parsedIngress) resolveCustomHeaders(x *index) (string, error) {
	s := &p.settings
	if s.CustomHeaders == "" {
		return "", nil
	}
	key := annotation.KeyOf(p.ing.Annotations, "custom-headers")
	refs := annotation.ConfigMaps(p.ing)
	if len(refs) == 0 {
		return key, fmt.Errorf("custom-headers %s: ConfigMaps of other namespaces cannot be referenced", annotation.QuoteForMessage(s.CustomHeaders))
	}
	cm := x.snap.ConfigMap(refs[0].Namespace, refs[0].Name)
	if cm == nil {
		return key, fmt.Errorf("ConfigMap %s not found", annotation.QuoteForMessage(refs[0].Namespace+"/"+refs[0].Name))
	}
	ops, err := configMapHeaders(cm)
	if err != nil {
		return key, err
	}
	s.ResponseHeaders = mergeHeaderOps(append(ops, s.ResponseHeaders...))
	return "", nil
}

// configMapHeaders are a ConfigMap's data entries as headers to set.
func configMapHeaders(cm *corev1.ConfigMap) ([]model.HeaderOp, error) {
	if len(cm.BinaryData) > 0 {
		return nil, errors.New("the ConfigMap has binaryData: header values must be text under data")
	}
	if len(cm.Data) > annotation.MaxHeaderLines {
		return nil, fmt.Errorf("the ConfigMap has %d entries, the limit is %d", len(cm.Data), annotation.MaxHeaderLines)
	}
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ops := make([]model.HeaderOp, 0, len(keys))
	for _, k := range keys {
		op, err := annotation.HeaderSet(k, cm.Data[k])
		if err != nil {
			return nil, fmt.Errorf("ConfigMap key %s: %w", annotation.QuoteForMessage(k), err)
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
