package gatewayapi

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// parsedGateway is one Gateway of ours on its way to a load balancer.
type parsedGateway struct {
	gw   *gwv1.Gateway
	ref  model.ObjectRef
	uuid string
	// refusal, when set, is why the Gateway is not served at all
	// (Accepted=False with this reason).
	refusal, refusalMessage string
	// infra is spec.infrastructure's labels and annotations, validated.
	infra translate.GatewayInfrastructure
	// address is what spec.addresses asks of IPAM.
	address   gwAddress
	listeners []*gwListener
	// backendClient is the client certificate its pools present to
	// members under a BackendTLSPolicy (backendclient.go).
	backendClient backendClient
	// entries are the routes' matches, by model listener port.
	entries map[int][]gwEntry
	pools   map[string]*model.Pool
	// sets are the ListenerSets naming the Gateway, accepted or not
	// (listenersets.go); attachedSets counts those it accepted. Their
	// accepted listeners follow the Gateway's own in listeners.
	sets         map[model.ObjectRef]*parsedListenerSet
	attachedSets int32
}

// gwListener is one Gateway listener with what its conditions say.
type gwListener struct {
	name     gwv1.SectionName
	port     int
	protocol model.Protocol
	host     string // validated; "" matches every host, "*.x" a suffix
	certs    []model.Certificate
	kinds    []gwv1.RouteGroupKind
	// Each condition is a reason; "" means the condition holds.
	notAccepted, unresolved, conflicted string
	message                             string
	attached                            int32
	// routeHosts are the hostnames the routes attached so far serve,
	// by route kind (grpcroutes.go: one kind per hostname).
	routeHosts map[string][]string
	// udpRoute is the UDPRoute a UDP listener serves (udproute.go).
	udpRoute *udpRoute
	// tcpRoute is the TCPRoute a TCP listener serves (tcproutes.go).
	tcpRoute *tcpRoute
	// passthrough marks a TLS listener (tls.mode Passthrough): protocol
	// TERMINATED_HTTPS, so it shares a port with HTTPS listeners, but it
	// takes TLSRoutes, terminates nothing and has no certificates; its
	// routes are tlsRoutes (tlsroutes.go).
	passthrough bool
	tlsRoutes   []tlsAttachment
	// tlsTerminate marks a TLS listener in tls.mode Terminate: protocol
	// TERMINATED_HTTPS too, and it takes TLSRoutes, but it terminates
	// TLS with its certs and passes the plain bytes on (tlsroutes.go).
	tlsTerminate bool
	// clientValidation is an HTTPS listener's check of client
	// certificates (frontendtls.go); caUnresolved the ResolvedRefs reason
	// of a CA ref that failed while others resolved (the listener is
	// still served, with those).
	clientValidation *model.ClientValidation
	caUnresolved     string
	// set is the ListenerSet the listener is of (listenersets.go); nil
	// for the Gateway's own. A parentRef selects the listeners of the
	// object it names only.
	set *parsedListenerSet
	// allowedRoutes is the listener's spec; namespace is its owner's
	// (the Gateway's or the ListenerSet's), which allowedRoutes'
	// namespaces "Same" means.
	allowedRoutes *gwv1.AllowedRoutes
	namespace     string
}

// tlsListener reports whether l is a TLS listener (either mode): it
// takes TLSRoutes, and no HTTP is read on its connections.
func (l *gwListener) tlsListener() bool { return l.passthrough || l.tlsTerminate }

// usable reports whether routes may attach: the listener is accepted, not
// in conflict, its references resolve and it takes HTTPRoutes.
func (l *gwListener) usable() bool {
	return l.notAccepted == "" && l.conflicted == "" && l.unresolved == "" && len(l.kinds) > 0
}

// takes reports whether the listener takes routes of kind.
func (l *gwListener) takes(kind string) bool {
	for _, k := range l.kinds {
		if string(k.Kind) == kind {
			return true
		}
	}
	return false
}

var routeKindHTTP = gwv1.RouteGroupKind{Group: ptrTo(gwv1.Group(gwv1.GroupName)), Kind: "HTTPRoute"}

func ptrTo[T any](v T) *T { return &v }

func parseGateway(gw *gwv1.Gateway, x *index, opts translate.Options, problems *[]model.Problem) *parsedGateway {
	p := &parsedGateway{gw: gw, entries: map[int][]gwEntry{}, pools: map[string]*model.Pool{},
		ref: model.ObjectRef{Kind: model.KindGateway, Namespace: gw.Namespace, Name: gw.Name}}
	p.uuid = translate.ValidUID(string(gw.UID))
	if p.uuid == "" {
		p.uuid = translate.NameUUID("gateway", gw.Namespace, gw.Name)
	}
	p.address = gatewayAddress(gw, opts)
	switch {
	case p.address.unsupported != "":
		p.refusal, p.refusalMessage = string(gwv1.GatewayReasonUnsupportedAddress), p.address.unsupported
		*problems = append(*problems, gatewayProblem(gw, p.refusal, "spec.addresses", p.refusalMessage))
	case p.address.notUsable != "":
		*problems = append(*problems, gatewayProblem(gw, string(gwv1.GatewayReasonAddressNotUsable), "spec.addresses", p.address.notUsable))
	}
	if field, msg := "", ""; p.refusal == "" {
		if p.infra, field, msg = parseInfrastructure(gw); field != "" {
			p.refusal, p.refusalMessage = string(gwv1.GatewayReasonInvalidParameters), field+": "+msg
			*problems = append(*problems, gatewayProblem(gw, p.refusal, field, msg+": the Gateway is not served"))
		}
	}
	if p.backendClient = resolveBackendClient(gw, x); p.backendClient.reason != "" {
		*problems = append(*problems, gatewayProblem(gw, p.backendClient.reason, backendClientCertificateField,
			p.backendClient.message+": its pools connect to TLS backends without a client certificate"))
	}
	names := map[gwv1.SectionName]bool{}
	for i := range gw.Spec.Listeners {
		l := parseListener(gw, referrer{kind: model.KindGateway, namespace: gw.Namespace}, &gw.Spec.Listeners[i], x)
		if names[l.name] && l.notAccepted == "" {
			// The API server refuses this; a manifest file may not.
			l.notAccepted, l.message = string(gwv1.ListenerReasonInvalid), "another listener has the same name"
		}
		names[l.name] = true
		if l.message != "" {
			*problems = append(*problems, gatewayProblem(gw, firstNonEmpty(l.notAccepted, l.unresolved, l.caUnresolved),
				fmt.Sprintf("spec.listeners[%d]", i), l.message))
		}
		p.listeners = append(p.listeners, l)
	}
	markConflicts(p.listeners)
	// Refused only when no listener is accepted; one whose references do
	// not resolve keeps the Gateway accepted (its routes still count in
	// attachedRoutes), but a Gateway without a usable listener has no
	// load balancer.
	if p.refusal == "" && !anyValid(p.listeners) {
		p.refusal, p.refusalMessage = string(gwv1.GatewayReasonListenersNotValid), "no listener is valid"
	}
	return p
}

func gatewayProblem(gw *gwv1.Gateway, reason, field, message string) model.Problem {
	return model.Problem{Kind: model.KindGateway, Namespace: gw.Namespace, Name: gw.Name,
		Severity: model.SeverityError, Reason: reason, Field: field, Message: message}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// valid: accepted and not in conflict.
func (l *gwListener) valid() bool { return l.notAccepted == "" && l.conflicted == "" }

func anyValid(ls []*gwListener) bool {
	for _, l := range ls {
		if l.valid() {
			return true
		}
	}
	return false
}

func anyUsable(ls []*gwListener) bool {
	for _, l := range ls {
		if l.usable() {
			return true
		}
	}
	return false
}

// parseListener validates one listener, of the Gateway or of one of its
// ListenerSets (from). Every user string (name, hostname) goes through
// the same allow-lists as an Ingress's.
func parseListener(gw *gwv1.Gateway, from referrer, spec *gwv1.Listener, x *index) *gwListener {
	l := &gwListener{name: spec.Name, port: int(spec.Port), allowedRoutes: spec.AllowedRoutes, namespace: from.namespace}
	refuse := func(reason gwv1.ListenerConditionReason, format string, args ...any) *gwListener {
		l.notAccepted, l.message = string(reason), fmt.Sprintf(format, args...)
		return l
	}
	if errs := validation.IsDNS1123Subdomain(string(spec.Name)); len(errs) > 0 {
		return refuse(gwv1.ListenerReasonInvalid, "name %s is not a valid section name", translate.Quote(string(spec.Name)))
	}
	if _, err := encode.Port(l.port); err != nil {
		return refuse(gwv1.ListenerReasonPortUnavailable, "port: %v", err)
	}
	if spec.Hostname != nil {
		h := string(*spec.Hostname)
		if _, err := translate.CheckHost(h); err != nil || h == "" {
			return refuse(gwv1.ListenerReasonInvalid, "hostname %s: %v", translate.Quote(h), err)
		}
		l.host = h
	}
	switch spec.Protocol {
	case gwv1.HTTPProtocolType:
		l.protocol = model.ProtocolHTTP
	case gwv1.HTTPSProtocolType:
		l.protocol = model.ProtocolTerminatedHTTPS
		l.certs, l.unresolved, l.message = listenerCerts(from, spec, l.host, x)
		applyFrontendValidation(gw, l, x)
	case gwv1.TLSProtocolType:
		// The API server defaults tls.mode to Terminate; a file may
		// leave tls out.
		mode := gwv1.TLSModeTerminate
		if spec.TLS != nil && spec.TLS.Mode != nil {
			mode = *spec.TLS.Mode
		}
		switch mode {
		case gwv1.TLSModeTerminate:
			// Its certificates as an HTTPS listener's; its routes are
			// TLSRoutes, decrypted (tlsroutes.go).
			l.protocol, l.tlsTerminate = model.ProtocolTerminatedHTTPS, true
			l.certs, l.unresolved, l.message = listenerCerts(from, spec, l.host, x)
		case gwv1.TLSModePassthrough:
			if len(spec.TLS.CertificateRefs) > 0 {
				// The API server refuses this; a manifest file may not.
				return refuse(gwv1.ListenerReasonInvalid, "a TLS listener in tls.mode Passthrough has no certificateRefs")
			}
			l.protocol, l.passthrough = model.ProtocolTerminatedHTTPS, true
		default:
			return refuse(reasonUnsupportedValue, "tls.mode %s on a TLS listener is not Terminate or Passthrough", translate.Quote(string(mode)))
		}
	case gwv1.TCPProtocolType:
		// The API server refuses both; a manifest file may not.
		if spec.Hostname != nil {
			return refuse(gwv1.ListenerReasonInvalid, "a TCP listener has no hostname")
		}
		if spec.TLS != nil {
			return refuse(gwv1.ListenerReasonInvalid, "a TCP listener has no tls")
		}
		l.protocol = model.ProtocolTCP
	case gwv1.UDPProtocolType:
		if reason, msg := parseUDPListener(l, spec); reason != "" {
			return refuse(reason, "%s", msg)
		}
	default:
		return refuse(gwv1.ListenerReasonUnsupportedProtocol, "protocol %s is not HTTP, HTTPS, TLS, TCP or UDP", translate.Quote(string(spec.Protocol)))
	}
	l.kinds = routeKinds(l, spec.AllowedRoutes)
	if l.unresolved == "" && spec.AllowedRoutes != nil && len(spec.AllowedRoutes.Kinds) > 0 && len(spec.AllowedRoutes.Kinds) != len(l.kinds) {
		l.unresolved, l.message = string(gwv1.ListenerReasonInvalidRouteKinds), "only HTTPRoute and GRPCRoute are supported in allowedRoutes.kinds of an HTTP or HTTPS listener"
		switch {
		case l.protocol == model.ProtocolTCP:
			l.message = "only TCPRoute is supported in allowedRoutes.kinds of a TCP listener"
		case l.tlsListener():
			l.message = "only TLSRoute is supported in allowedRoutes.kinds of a TLS listener"
		case l.protocol == model.ProtocolUDP:
			l.message = "only UDPRoute is supported in allowedRoutes.kinds of a UDP listener"
		}
	}
	return l
}

// routeKinds are the kinds a listener takes: on HTTP and HTTPS,
// HTTPRoute and GRPCRoute (gRPC is HTTP/2: h2c on HTTP, ALPN h2 on
// HTTPS); on TCP, TCPRoute; on TLS (either tls.mode), TLSRoute; on UDP,
// UDPRoute; unless the user listed kinds, then those of them pier
// supports on the protocol.
func routeKinds(l *gwListener, ar *gwv1.AllowedRoutes) []gwv1.RouteGroupKind {
	if l.protocol == model.ProtocolUDP {
		return udpRouteKinds(ar)
	}
	tcp, tls := l.protocol == model.ProtocolTCP, l.tlsListener()
	if ar == nil || len(ar.Kinds) == 0 {
		switch {
		case tcp:
			return []gwv1.RouteGroupKind{routeKindTCP}
		case tls:
			return []gwv1.RouteGroupKind{routeKindTLS}
		}
		return []gwv1.RouteGroupKind{routeKindHTTP, routeKindGRPC}
	}
	http := !tcp && !tls
	var out []gwv1.RouteGroupKind
	for _, k := range ar.Kinds {
		if k.Group != nil && *k.Group != gwv1.GroupName {
			continue
		}
		switch {
		case k.Kind == model.KindHTTPRoute && http:
			out = append(out, routeKindHTTP)
		case k.Kind == model.KindGRPCRoute && http:
			out = append(out, routeKindGRPC)
		case k.Kind == model.KindTCPRoute && tcp:
			out = append(out, routeKindTCP)
		case k.Kind == model.KindTLSRoute && tls:
			out = append(out, routeKindTLS)
		}
	}
	return out
}

// listenerCerts resolves an HTTPS listener's certificateRefs: Secrets of
// the Gateway's namespace, or of another whose ReferenceGrant permits
// Gateways of this one, parsed and checked as an Ingress's. It returns the ResolvedRefs reason when one fails.
func listenerCerts(from referrer, spec *gwv1.Listener, host string, x *index) ([]model.Certificate, string, string) {
	tls := spec.TLS
	if tls != nil && tls.Mode != nil && *tls.Mode != gwv1.TLSModeTerminate {
		return nil, string(gwv1.ListenerReasonInvalidCertificateRef), "only TLS mode Terminate is supported on HTTPS"
	}
	if tls == nil || len(tls.CertificateRefs) == 0 {
		return nil, string(gwv1.ListenerReasonInvalidCertificateRef), "an HTTPS listener, or a TLS one in tls.mode Terminate, needs tls.certificateRefs"
	}
	var hosts []string
	if host != "" {
		hosts = []string{host}
	}
	var certs []model.Certificate
	for i, ref := range tls.CertificateRefs {
		field := fmt.Sprintf("tls.certificateRefs[%d]", i)
		if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
			return nil, string(gwv1.ListenerReasonInvalidCertificateRef), field + ": only core Secrets are supported"
		}
		ns, name, invalid, notPermitted := x.referrerRef(from, "Secret", ref.Namespace, ref.Name)
		switch {
		case invalid != "":
			return nil, string(gwv1.ListenerReasonInvalidCertificateRef), field + ": " + invalid
		case notPermitted != "":
			return nil, string(gwv1.ListenerReasonRefNotPermitted), field + ": " + notPermitted
		}
		cert, err := translate.Certificate(x.Snapshot().Secret(ns, name), ns, name, hosts)
		if err != nil {
			return nil, string(gwv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("%s: secret %s/%s: %v", field, ns, name, err)
		}
		certs = append(certs, cert)
	}
	return certs, "", ""
}

// markConflicts applies the spec's conflict rules: listeners on one port
// with different protocols conflict (ProtocolConflict), and so do
// listeners with the same port, protocol and hostname (HostnameConflict).
// HTTPS and TLS listeners (of either tls.mode) share a protocol here
// (all choose by SNI, the spec's example of compatible listeners): they
// may share a port with different hostnames, and conflict on the same
// one.
func markConflicts(ls []*gwListener) {
	for i, a := range ls {
		if a.notAccepted != "" {
			continue
		}
		for _, b := range ls[:i] {
			if b.notAccepted != "" {
				continue
			}
			if reason := conflictOf(a, b); reason != "" {
				a.conflicted, b.conflicted = reason, reason
			}
		}
	}
}

// conflictOf is the spec's conflict between two accepted listeners, ""
// when they have none: on one port, another protocol (ProtocolConflict)
// or the same hostname (HostnameConflict). A UDP listener conflicts only
// with another UDP one: a port number belongs to one transport protocol,
// so UDP 53 and TCP 53 are two ports.
func conflictOf(a, b *gwListener) string {
	if a.port != b.port || (a.protocol == model.ProtocolUDP) != (b.protocol == model.ProtocolUDP) {
		return ""
	}
	switch {
	case a.protocol != b.protocol:
		return string(gwv1.ListenerReasonProtocolConflict)
	case a.host == b.host:
		return string(gwv1.ListenerReasonHostnameConflict)
	}
	return ""
}

// listenerStatus is one listener's status; generation is the Gateway's.
func (l *gwListener) status(generation int64) gwv1.ListenerStatus {
	cs := []metav1.Condition{
		condition(generation, string(gwv1.ListenerConditionAccepted), l.notAccepted == "",
			firstNonEmpty(l.notAccepted, string(gwv1.ListenerReasonAccepted)), l.acceptedMessage()),
		condition(generation, string(gwv1.ListenerConditionResolvedRefs), l.unresolved == "" && l.caUnresolved == "",
			firstNonEmpty(l.unresolved, l.caUnresolved, string(gwv1.ListenerReasonResolvedRefs)), messageIf(l.unresolved+l.caUnresolved, l.message)),
		condition(generation, string(gwv1.ListenerConditionConflicted), l.conflicted != "",
			firstNonEmpty(l.conflicted, string(gwv1.ListenerReasonNoConflicts)), ""),
	}
	if l.usable() {
		cs = append(cs, condition(generation, string(gwv1.ListenerConditionProgrammed), false,
			string(gwv1.ListenerReasonPending), "waiting for HAProxy to serve it"))
	} else {
		// A ListenerSet's listener that lost a conflict says so in
		// Programmed too, as the spec's precedence asks.
		reason := string(gwv1.ListenerReasonInvalid)
		if l.set != nil && l.conflicted != "" {
			reason = l.conflicted
		}
		cs = append(cs, condition(generation, string(gwv1.ListenerConditionProgrammed), false,
			reason, "the listener is not served"))
	}
	kinds := l.kinds
	if kinds == nil {
		kinds = []gwv1.RouteGroupKind{}
	}
	return gwv1.ListenerStatus{Name: l.name, SupportedKinds: kinds, AttachedRoutes: l.attached, Conditions: cs}
}

func (l *gwListener) acceptedMessage() string {
	if l.notAccepted != "" {
		return l.message
	}
	return ""
}

func messageIf(reason, message string) string {
	if reason == "" {
		return ""
	}
	return message
}

// status is the Gateway's own status. Programmed stays False/Pending
// until the status pass sees HAProxy serve the load balancer.
func (p *parsedGateway) status() gwv1.GatewayStatus {
	gen := p.gw.Generation
	st := gwv1.GatewayStatus{}
	if p.refusal != "" {
		st.Conditions = []metav1.Condition{
			condition(gen, string(gwv1.GatewayConditionAccepted), false, p.refusal, p.refusalMessage),
			condition(gen, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), "the Gateway is not served"),
		}
	} else {
		reason, message := string(gwv1.GatewayReasonAccepted), ""
		for _, l := range p.ownListeners() {
			if !l.valid() {
				// Accepted, with the reason saying not all of it is.
				reason, message = string(gwv1.GatewayReasonListenersNotValid), "listener "+string(l.name)+" is not valid"
				break
			}
		}
		programmed := condition(gen, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonPending), "waiting for HAProxy to serve it")
		if p.address.notUsable != "" {
			programmed = condition(gen, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonAddressNotUsable), p.address.notUsable)
		}
		resolved, resolvedReason, resolvedMessage := p.resolvedRefsCondition()
		st.Conditions = []metav1.Condition{
			condition(gen, string(gwv1.GatewayConditionAccepted), true, reason, message),
			programmed,
			condition(gen, gatewayConditionResolvedRefs, resolved, resolvedReason, resolvedMessage),
		}
		if insecureFrontend(p.gw) {
			st.Conditions = append(st.Conditions, condition(gen, string(gwv1.GatewayConditionInsecureFrontendValidationMode), true,
				string(gwv1.GatewayReasonConfigurationChanged), "spec.tls.frontend accepts clients without a valid certificate (AllowInsecureFallback)"))
		}
	}
	for _, l := range p.ownListeners() {
		st.Listeners = append(st.Listeners, l.status(gen))
	}
	return st
}

// modelListenerName is ours, from protocol and port: Gateway listener
// names are user strings and never reach a file.
func modelListenerName(proto model.Protocol, port int) string {
	return strings.ToLower(string(proto)) + "-" + strconv.Itoa(port)
}
