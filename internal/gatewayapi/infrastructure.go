package gatewayapi

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// A Gateway's spec.infrastructure: its labels and annotations go onto
// what pier creates for the Gateway in its namespace, the Service (and
// its EndpointSlice) that names the Gateway's address there
// (cluster/gatewayservice.go). They are metadata of Kubernetes objects,
// so they are checked as the API server checks labels and annotations;
// one that is not valid refuses the Gateway (Accepted=False,
// InvalidParameters), as pier cannot create what it asks. pier takes no
// parameters: a parametersRef refuses it likewise.

// GatewayNameLabel is the label the Gateway API puts on what an
// implementation creates for a Gateway: the Gateway's name.
const GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// ManagedByLabel marks the Services and EndpointSlices pier publishes for
// Gateways, so the writer never takes or deletes one it did not create.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ManagedByValue is ManagedByLabel's value on them.
const ManagedByValue = "pier-gateway"

// maxInfrastructureEntries is the CRD's bound on each map.
const maxInfrastructureEntries = 8

// maxAnnotationsBytes is the API server's bound on an object's
// annotations, keys and values together.
const maxAnnotationsBytes = 256 * 1024

// parseInfrastructure validates spec.infrastructure; a refusal names the
// field and the reason.
func parseInfrastructure(gw *gwv1.Gateway) (translate.GatewayInfrastructure, string, string) {
	var out translate.GatewayInfrastructure
	in := gw.Spec.Infrastructure
	if in == nil {
		return out, "", ""
	}
	if in.ParametersRef != nil {
		return out, "spec.infrastructure.parametersRef", "pier takes no parameters"
	}
	if len(in.Labels) > maxInfrastructureEntries {
		return out, "spec.infrastructure.labels", fmt.Sprintf("%d labels, at most %d", len(in.Labels), maxInfrastructureEntries)
	}
	if len(in.Annotations) > maxInfrastructureEntries {
		return out, "spec.infrastructure.annotations", fmt.Sprintf("%d annotations, at most %d", len(in.Annotations), maxInfrastructureEntries)
	}
	for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
		v := string(in.Labels[k])
		field := "spec.infrastructure.labels[" + translate.Quote(string(k)) + "]"
		if err := infrastructureKey(string(k)); err != "" {
			return out, field, "key: " + err
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return out, field, "value " + translate.Quote(v) + ": " + strings.Join(errs, "; ")
		}
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels[string(k)] = v
	}
	size := 0
	for _, k := range slices.Sorted(maps.Keys(in.Annotations)) {
		v := string(in.Annotations[k])
		field := "spec.infrastructure.annotations[" + translate.Quote(string(k)) + "]"
		if err := infrastructureKey(string(k)); err != "" {
			return out, field, "key: " + err
		}
		if err := annotationValue(v); err != "" {
			return out, field, "value: " + err
		}
		if size += len(k) + len(v); size > maxAnnotationsBytes {
			return out, "spec.infrastructure.annotations", fmt.Sprintf("more than %d bytes", maxAnnotationsBytes)
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[string(k)] = v
	}
	return out, "", ""
}

// infrastructureKey checks a label or annotation key: a qualified name
// (an optional DNS subdomain prefix and "/", then a name of up to 63
// characters), not one of the keys pier sets itself, and none of
// pier's own prefix.
func infrastructureKey(k string) string {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return translate.Quote(k) + ": " + strings.Join(errs, "; ")
	}
	prefix, _, named := strings.Cut(k, "/")
	switch {
	case k == GatewayNameLabel || k == ManagedByLabel:
		return translate.Quote(k) + " is set by pier"
	case named && (prefix == "pier.dev" || strings.HasSuffix(prefix, ".pier.dev")):
		return translate.Quote(k) + " is in pier's own prefix"
	case named && (prefix == "kubernetes.io" || prefix == "k8s.io" || strings.HasSuffix(prefix, ".kubernetes.io") || strings.HasSuffix(prefix, ".k8s.io")):
		// kube-proxy and the EndpointSlice controller read these.
		return translate.Quote(k) + " is in a prefix Kubernetes reserves for itself"
	}
	return ""
}

// annotationValue refuses control bytes and invalid UTF-8 (the API
// server takes any string; the values reach logs and the web view).
func annotationValue(v string) string {
	if !utf8.ValidString(v) {
		return "not valid UTF-8"
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return "holds a control character"
		}
	}
	return ""
}

// infrastructure is what the Gateway's published Service carries: its
// validated labels and annotations, and the ports of its usable
// listeners.
func (p *parsedGateway) infrastructure() translate.GatewayInfrastructure {
	out := p.infra
	seen := map[translate.GatewayPort]bool{}
	for _, l := range p.listeners {
		if !l.usable() {
			continue
		}
		port := translate.GatewayPort{Port: int32(l.port), Protocol: "TCP"}
		if l.protocol == model.ProtocolUDP {
			port.Protocol = "UDP"
		}
		if !seen[port] {
			seen[port] = true
			out.Ports = append(out.Ports, port)
		}
	}
	slices.SortFunc(out.Ports, func(a, b translate.GatewayPort) int {
		if a.Port != b.Port {
			return int(a.Port - b.Port)
		}
		return strings.Compare(a.Protocol, b.Protocol)
	})
	return out
}
