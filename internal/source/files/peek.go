package files

import (
	"bytes"
	"regexp"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A manifest folder may hold large documents of kinds pier never reads (a
// ConfigMap of a few MiB, a CRD). Converting such a YAML document to JSON
// only to learn its kind cost about 40 times its size in memory (an 8 MiB
// ConfigMap: ~310 MB). So the kind is read first, from the document's
// top-level lines, and a kind pier ignores is skipped unconverted.

// peekHeader reads apiVersion and kind from the top-level lines of a YAML
// document ("kind: Ingress" at column 0). ok is false when the document
// does not plainly say both (flow style, anchors, tags, quotes that need
// YAML's rules, a key given twice): it then takes the full decode.
func peekHeader(doc []byte) (h header, ok bool) {
	seen := map[string]int{}
	first := true
	for line := range bytes.Lines(doc) {
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') && !first {
			continue // nested: not a top-level key, and not worth a copy
		}
		text := strings.TrimRight(string(line), " \t\r\n")
		if text == "" || text[0] == '#' {
			continue
		}
		if first && !topLevelKey.MatchString(text) {
			return header{}, false // not a plain mapping
		}
		first = false
		key, value, found := strings.Cut(text, ":")
		if !found || (key != "apiVersion" && key != "kind") {
			continue
		}
		seen[key]++
		v, plain := plainScalar(value)
		if !plain {
			return header{}, false
		}
		if key == "kind" {
			h.Kind = v
		} else {
			h.APIVersion = v
		}
	}
	return h, seen["apiVersion"] == 1 && seen["kind"] == 1
}

// topLevelKey is a mapping's key at column 0.
var topLevelKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*:( |$)`)

// plainScalar returns a top-level value written as a plain word, with an
// optional comment; ok is false for anything YAML could read differently.
func plainScalar(s string) (string, bool) {
	if i := strings.Index(s, " #"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "\"'{}[]&*!|>%@`#,") {
		return "", false
	}
	return s, true
}

// skippable reports whether a document whose header peekHeader read is of
// a kind pier ignores without a word, so its body need not be decoded.
func skippable(h header) bool {
	gv, err := schema.ParseGroupVersion(h.APIVersion)
	if err != nil || gv.Version == "" || h.Kind == "" {
		return false
	}
	keep, problem := kindVerdict(gv.WithKind(h.Kind))
	return !keep && problem == ""
}

// movedKinds are kept kinds that older Kubernetes served from another
// group: extensions/v1beta1 Ingress (removed in 1.22) is still in many
// charts and blog posts. A group pier does not otherwise read would make
// kindVerdict ignore them in silence, and the user clearly meant pier to
// read them.
var movedKinds = map[schema.GroupKind]schema.GroupVersion{
	{Group: "extensions", Kind: "Ingress"}:     networkingv1.SchemeGroupVersion,
	{Group: "extensions", Kind: "IngressList"}: networkingv1.SchemeGroupVersion,
}

// kindVerdict says whether pier reads a kind (keep) or, when it does not,
// what is wrong with the document (problem; "" when the kind is simply
// not pier's business).
func kindVerdict(gvk schema.GroupVersionKind) (keep bool, problem string) {
	if keptKinds[gvk] {
		return true, ""
	}
	if _, ok := listKinds[gvk]; ok {
		return true, ""
	}
	if to, ok := movedKinds[gvk.GroupKind()]; ok {
		return false, gvk.GroupVersion().String() + " is not supported, use " + to.String()
	}
	for kept := range keptKinds {
		if kept.Group == gvk.Group && (kept.Kind == gvk.Kind || kept.Kind+"List" == gvk.Kind) {
			return false, gvk.GroupVersion().String() + " is not supported, use " + kept.GroupVersion().String()
		}
	}
	if scheme.IsVersionRegistered(gvk.GroupVersion()) && !scheme.Recognizes(gvk) {
		return false, "unknown kind in " + gvk.GroupVersion().String()
	}
	return false, ""
}
