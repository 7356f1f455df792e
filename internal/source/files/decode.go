package files

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1alpha3 "sigs.k8s.io/gateway-api/apis/v1alpha3"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/source"
)

// scheme knows only the API groups pier reads. The decoder is strict, so an
// unknown or duplicate field is reported instead of silently dropped: a
// typo in a manifest must not quietly change routing.
var scheme, decoder = newDecoder()

func newDecoder() (*runtime.Scheme, runtime.Decoder) {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))
	utilruntime.Must(discoveryv1.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(gwv1beta1.Install(s))
	utilruntime.Must(gwv1alpha2.Install(s))
	// UDPRoute is v1 too in v1.7.0's experimental channel (v1alpha2 still
	// served), with the same fields.
	s.AddKnownTypeWithName(gwv1.SchemeGroupVersion.WithKind("UDPRoute"), &gwv1alpha2.UDPRoute{})
	s.AddKnownTypeWithName(gwv1.SchemeGroupVersion.WithKind("UDPRouteList"), &gwv1alpha2.UDPRouteList{})
	// TCPRoute is v1 in the standard channel since Gateway API v1.6,
	// with v1alpha2's fields; pier's module (v1.4.1) has only the
	// v1alpha2 type, which reads both.
	s.AddKnownTypeWithName(gwv1.SchemeGroupVersion.WithKind("TCPRoute"), &gwv1alpha2.TCPRoute{})
	s.AddKnownTypeWithName(gwv1.SchemeGroupVersion.WithKind("TCPRouteList"), &gwv1alpha2.TCPRouteList{})
	// TLSRoute is v1 in the standard channel since v1.5 and v1alpha3 in
	// the experimental one, both with v1alpha2's fields.
	for _, gv := range []schema.GroupVersion{gwv1.SchemeGroupVersion, gwv1alpha3.SchemeGroupVersion} {
		s.AddKnownTypeWithName(gv.WithKind("TLSRoute"), &gwv1alpha2.TLSRoute{})
		s.AddKnownTypeWithName(gv.WithKind("TLSRouteList"), &gwv1alpha2.TLSRouteList{})
	}
	// ListenerSet is v1 in the standard channel since v1.5; pier's
	// module has no such type, so it is pier's own (source.ListenerSet).
	s.AddKnownTypeWithName(gwv1.SchemeGroupVersion.WithKind("ListenerSet"), &source.ListenerSet{})
	return s, serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}

// keptKinds are the kinds that reach the snapshot.
var keptKinds = map[schema.GroupVersionKind]bool{
	networkingv1.SchemeGroupVersion.WithKind("Ingress"):      true,
	networkingv1.SchemeGroupVersion.WithKind("IngressClass"): true,
	corev1.SchemeGroupVersion.WithKind("Service"):            true,
	corev1.SchemeGroupVersion.WithKind("Secret"):             true,
	// ConfigMaps only when an Ingress names them (custom-headers), a
	// Gateway (a client certificate CA) or a BackendTLSPolicy (the CA of
	// a Service's certificate).
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):          true,
	discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"): true,
	corev1.SchemeGroupVersion.WithKind("Node"):               true,
	// Namespaces only for their labels (allowedRoutes selectors).
	corev1.SchemeGroupVersion.WithKind("Namespace"):  true,
	gwv1.SchemeGroupVersion.WithKind("GatewayClass"): true,
	gwv1.SchemeGroupVersion.WithKind("Gateway"):      true,
	gwv1.SchemeGroupVersion.WithKind("HTTPRoute"):    true,
	gwv1.SchemeGroupVersion.WithKind("GRPCRoute"):    true,
	// UDPRoute: v1alpha2 and v1 (both in v1.7.0's experimental channel).
	gwv1alpha2.SchemeGroupVersion.WithKind("UDPRoute"): true,
	gwv1.SchemeGroupVersion.WithKind("UDPRoute"):       true,
	// TCPRoute: v1alpha2 (the experimental channel up to v1.5) and v1
	// (the standard channel since v1.6).
	gwv1alpha2.SchemeGroupVersion.WithKind("TCPRoute"): true,
	gwv1.SchemeGroupVersion.WithKind("TCPRoute"):       true,
	// TLSRoute: v1 (standard since v1.5), v1alpha3 and v1alpha2.
	gwv1.SchemeGroupVersion.WithKind("TLSRoute"):       true,
	gwv1alpha3.SchemeGroupVersion.WithKind("TLSRoute"): true,
	gwv1alpha2.SchemeGroupVersion.WithKind("TLSRoute"): true,
	// BackendTLSPolicy: v1, in the standard channel since v1.4.
	gwv1.SchemeGroupVersion.WithKind("BackendTLSPolicy"): true,
	// ListenerSet: v1, in the standard channel since v1.5.
	gwv1.SchemeGroupVersion.WithKind("ListenerSet"): true,
	// v1beta1 is ReferenceGrant's version in the v1.4 standard channel.
	gwv1beta1.SchemeGroupVersion.WithKind("ReferenceGrant"): true,
}

// maxConfigMapDoc bounds a ConfigMap document that is decoded: pier reads
// only custom-headers ConfigMaps (at most 32 headers) and CA bundles (a
// few certificates each), and a folder of
// manifests often holds large ones (dashboards, scripts) that are not
// pier's business; they are skipped before conversion, as other kinds.
const maxConfigMapDoc = 256 << 10

func largeConfigMap(h header, data []byte) bool {
	return h.APIVersion == "v1" && h.Kind == "ConfigMap" && len(data) > maxConfigMapDoc
}

// listKinds maps the lists that are expanded to the kind of their items;
// the items of a v1 List carry their own.
var listKinds = func() map[schema.GroupVersionKind]schema.GroupVersionKind {
	m := map[schema.GroupVersionKind]schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("List"): {},
	}
	for gvk := range keptKinds {
		m[gvk.GroupVersion().WithKind(gvk.Kind+"List")] = gvk
	}
	return m
}()

// object is a decoded, defaulted object with where it came from.
type object struct {
	key objectKey
	obj kubeObject
	pos position
}

type kubeObject interface {
	metav1.Object
	runtime.Object
}

// fileDecoder decodes the documents of one file.
type fileDecoder struct {
	file     string
	mtime    metav1.Time
	previous map[objectKey]origin // the objects of the previous snapshot
	log      *slog.Logger

	objects  []object
	problems []Problem
}

// document is one YAML document or JSON value of a file.
type document struct {
	line int
	data []byte
	json bool
}

func (d *fileDecoder) decodeFile(data []byte, isJSON bool) {
	var docs []document
	if isJSON {
		docs = d.splitJSON(data)
	} else {
		docs = splitYAML(data)
	}
	num := 0
	for _, doc := range docs {
		lenient := doc.data
		var err error
		if !doc.json {
			if h, ok := peekHeader(doc.data); ok && (skippable(h) || largeConfigMap(h, doc.data)) {
				num++
				d.log.Debug("ignoring a kind pier does not read", "file", d.file, "doc", num,
					"apiVersion", h.APIVersion, "kind", h.Kind)
				continue
			}
			// Lenient first: an ignored kind with a duplicate key is not
			// pier's business. Kept kinds are converted strictly later.
			lenient, err = yaml.YAMLToJSON(doc.data)
		}
		if err == nil && isNull(lenient) {
			continue // empty or comment-only documents are not counted
		}
		num++
		pos := position{doc: num, line: doc.line}
		if err != nil {
			d.problem(pos, "invalid YAML: %v", err)
			continue
		}
		d.decodeDoc(pos, doc, lenient)
	}
}

// splitYAML cuts a stream at "---" lines, the rule kubectl follows.
func splitYAML(data []byte) []document {
	var docs []document
	start, startLine, line := 0, 1, 1
	for off := 0; off < len(data); line++ {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		if string(bytes.TrimRight(data[off:next], " \t\r\n")) == "---" {
			docs = append(docs, document{line: startLine, data: data[start:off]})
			start, startLine = next, line+1
		}
		off = next
	}
	return append(docs, document{line: startLine, data: data[start:]})
}

// splitJSON reads a stream of JSON values. A syntax error ends the file,
// as nothing after it can be trusted to start a value.
func (d *fileDecoder) splitJSON(data []byte) []document {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			p := Problem{File: d.file, Message: fmt.Sprintf("invalid JSON: %v", err)}
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) {
				p.Line = lineAt(data, syntax.Offset)
			}
			d.problems = append(d.problems, p)
			return docs
		}
		line := lineAt(data, dec.InputOffset()-int64(len(raw)))
		docs = append(docs, document{line: line, data: raw, json: true})
	}
}

// lineAt is the 1-based line of a byte offset.
func lineAt(data []byte, offset int64) int {
	offset = min(max(offset, 0), int64(len(data)))
	return 1 + bytes.Count(data[:offset], []byte("\n"))
}

func isNull(js []byte) bool {
	js = bytes.TrimSpace(js)
	return len(js) == 0 || string(js) == "null"
}

// header is what is read of a document before choosing how to decode it.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// parseHeader reads the header of an object. A mistyped field is left to
// the strict decoder, which names it precisely.
func parseHeader(js []byte) (header, error) {
	var h header
	if t := bytes.TrimSpace(js); len(t) == 0 || t[0] != '{' {
		return h, errors.New("not a Kubernetes object: a mapping with apiVersion and kind is expected")
	}
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(js, &h); err != nil && !errors.As(err, &typeErr) {
		return h, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	return h, nil
}

// decodeDoc decodes one document, or expands it if it is a list.
func (d *fileDecoder) decodeDoc(pos position, doc document, lenient []byte) {
	h, err := parseHeader(lenient)
	if err != nil {
		d.problem(pos, "%v", err)
		return
	}
	gvk, ok := d.checkHeader(pos, h, schema.GroupVersionKind{})
	if !ok {
		return
	}
	strict := lenient
	if !doc.json {
		if strict, err = yaml.YAMLToJSONStrict(doc.data); err != nil {
			d.problem(pos, "%s: invalid YAML: %v", describe(h, gvk), err)
			return
		}
	}
	if item, isList := listKinds[gvk]; isList {
		d.decodeList(pos, strict, item)
		return
	}
	d.decodeObject(pos, strict, h, gvk)
}

// checkHeader resolves the kind of a document (items of typed lists may
// omit it) and says whether pier reads it. Kinds pier does not read are
// logged, not reported; a wrong version or a misspelt kind in a group pier
// reads is reported, since the user meant pier to read it.
func (d *fileDecoder) checkHeader(pos position, h header, def schema.GroupVersionKind) (schema.GroupVersionKind, bool) {
	gvk := def
	if h.APIVersion != "" {
		gv, err := schema.ParseGroupVersion(h.APIVersion)
		if err != nil {
			d.problem(pos, "%s: %v", describe(h, gvk), err)
			return gvk, false
		}
		gvk.Group, gvk.Version = gv.Group, gv.Version
	}
	if h.Kind != "" {
		gvk.Kind = h.Kind
	}
	if gvk.Kind == "" || gvk.Version == "" {
		d.problem(pos, "%s: apiVersion and kind are required", describe(h, gvk))
		return gvk, false
	}
	if keep, problem := kindVerdict(gvk); keep || problem != "" {
		if problem != "" {
			d.problem(pos, "%s: %s", describe(h, gvk), problem)
		}
		return gvk, keep
	}
	d.log.Debug("ignoring a kind pier does not read", "file", d.file, "doc", pos.doc,
		"apiVersion", gvk.GroupVersion().String(), "kind", gvk.Kind,
		"namespace", h.Metadata.Namespace, "name", h.Metadata.Name)
	return gvk, false
}

// decodeList expands a list; each item stands or falls on its own.
func (d *fileDecoder) decodeList(pos position, strict []byte, itemKind schema.GroupVersionKind) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(strict, &list); err != nil {
		d.problem(pos, "List: %v", err)
		return
	}
	for i, raw := range list.Items {
		ipos := pos
		ipos.item = i + 1
		h, err := parseHeader(raw)
		if err != nil {
			d.problem(ipos, "%v", err)
			continue
		}
		gvk, ok := d.checkHeader(ipos, h, itemKind)
		if !ok {
			continue
		}
		if _, nested := listKinds[gvk]; nested {
			d.problem(ipos, "%s: a List inside a List is not supported", describe(h, gvk))
			continue
		}
		d.decodeObject(ipos, raw, h, gvk)
	}
}

// decodeObject decodes a kept kind strictly, then defaults and checks it.
func (d *fileDecoder) decodeObject(pos position, strict []byte, h header, gvk schema.GroupVersionKind) {
	obj, _, err := decoder.Decode(strict, &gvk, nil)
	if strictErr, ok := runtime.AsStrictDecodingError(err); ok {
		msgs := make([]string, 0, len(strictErr.Errors()))
		for _, e := range strictErr.Errors() {
			msgs = append(msgs, e.Error())
		}
		d.problem(pos, "%s: %s", describe(h, gvk), strings.Join(msgs, "; "))
		return
	}
	if err != nil {
		d.problem(pos, "%s: %v", describe(h, gvk), err)
		return
	}
	ko, ok := obj.(kubeObject)
	if !ok {
		d.problem(pos, "%s: decoded to an unexpected %T", describe(h, gvk), obj)
		return
	}
	keep, err := finish(ko)
	key := objectKey{kind: gvk.Kind, namespace: ko.GetNamespace(), name: ko.GetName()}
	if err != nil {
		d.problem(pos, "%s: %v", describe(h, gvk), err)
		return
	}
	if !keep {
		d.log.Debug("ignoring a Secret that is neither TLS nor Opaque", "file", d.file,
			"doc", pos.doc, "namespace", key.namespace, "name", key.name)
		return
	}
	if ct := ko.GetCreationTimestamp(); ct.IsZero() {
		ts := d.mtime
		if prev, ok := d.previous[key]; ok {
			ts = prev.obj.GetCreationTimestamp()
		}
		ko.SetCreationTimestamp(ts)
	}
	d.objects = append(d.objects, object{key: key, obj: ko, pos: pos})
}

func (d *fileDecoder) problem(pos position, format string, args ...any) {
	d.problems = append(d.problems, Problem{File: d.file, Doc: pos.doc, Line: pos.line,
		Message: pos.itemPrefix() + fmt.Sprintf(format, args...)})
}

// describe names an object in a message the way kubectl does, with the
// namespace defaulted as it will be.
func describe(h header, gvk schema.GroupVersionKind) string {
	kind := gvk.Kind
	if kind == "" {
		kind = "object"
	}
	name := h.Metadata.Name
	if name == "" {
		name = "(no name)"
	}
	if clusterScoped(gvk.Kind) {
		return kind + " " + name
	}
	ns := h.Metadata.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return kind + " " + ns + "/" + name
}
