package gatewayapi

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/internal/translate"
)

// BackendTLSPolicy: a policy targeting a Service (or one named port of
// it, sectionName) makes the pools of the Gateways' routes to it speak
// TLS to its members, verifying their chain against the policy's CA
// bundle and their certificate against validation.hostname, which is
// also sent as SNI:
//
//	ssl verify required ca-file <bundle> verifyhost <hostname> sni str(<hostname>)
//
// The CA bundle is the ca.crt of the ConfigMaps of caCertificateRefs
// (core ConfigMaps of the policy's namespace), validated and re-encoded
// (tlscert.ParseCA) and carried in the model (model.UpstreamTLS.CAPEM):
// the agent writes it in a file named by its digest. What HAProxy cannot
// check is refused with a reason rather than checked less: the system's
// CA store (wellKnownCACertificates) is not read, and subjectAltNames
// other than exactly one Hostname cannot be verified (verifyhost checks
// one name). A policy not applied (no valid CA, a refused field) makes
// the pools of its Services answer 503 rather than speak unverified TLS.
//
// Of two policies targeting the same Service and sectionName, the older
// (then the first by namespace and name) applies and the other is
// Conflicted; one with a sectionName takes that port from one without.

// backendTLSPolicy is a policy after validation.
type backendTLSPolicy struct {
	p   *gwv1.BackendTLSPolicy
	ref model.ObjectRef
	// tls is what its pools verify; nil when the policy cannot be
	// applied (accepted false), and its Services' pools answer 503.
	tls *model.UpstreamTLS
	// accepted and resolved are its conditions' reasons and message
	// ("" reasons when true).
	notAccepted, notResolved, message string
	conflicted                        bool
	// ancestors are the Gateways of ours whose routes reach a Service it
	// targets, in the order found.
	ancestors []model.ObjectRef
}

// backendTLS indexes the policies by what they target.
type backendTLS struct {
	// byTarget: "namespace/service/section" (section "" for the whole
	// Service) to the policies targeting it, oldest first; the first
	// that is not conflicted applies.
	byTarget map[string][]*backendTLSPolicy
	all      []*backendTLSPolicy
}

func targetKey(ns, svc, section string) string { return ns + "/" + svc + "/" + section }

// newBackendTLS validates every policy (oldest first) and resolves its
// CA ConfigMaps from snap.
func newBackendTLS(snap *source.Snapshot) *backendTLS {
	b := &backendTLS{byTarget: map[string][]*backendTLSPolicy{}}
	for _, p := range oldestObjects(snap.BackendTLSPolicies) {
		bp := &backendTLSPolicy{p: p, ref: model.ObjectRef{Kind: model.KindBackendTLSPolicy, Namespace: p.Namespace, Name: p.Name}}
		bp.validate(snap)
		b.all = append(b.all, bp)
		seen := map[string]bool{}
		for _, t := range p.Spec.TargetRefs {
			if t.Group != "" || t.Kind != "Service" {
				continue // only core Services are targets; others select nothing
			}
			section := ""
			if t.SectionName != nil {
				section = string(*t.SectionName)
			}
			key := targetKey(p.Namespace, string(t.Name), section)
			if seen[key] {
				continue
			}
			seen[key] = true
			if len(b.byTarget[key]) > 0 {
				bp.conflicted = true
			}
			b.byTarget[key] = append(b.byTarget[key], bp)
		}
	}
	return b
}

// validate resolves the policy's CA bundle and checks its hostname and
// subjectAltNames.
func (bp *backendTLSPolicy) validate(snap *source.Snapshot) {
	v := bp.p.Spec.Validation
	host, err := encode.Host(string(v.Hostname))
	if err != nil {
		bp.notAccepted, bp.message = string(gwv1.PolicyReasonInvalid), "spec.validation.hostname: "+err.Error()
		return
	}
	verify := host.String()
	switch {
	case len(v.SubjectAltNames) == 1 && v.SubjectAltNames[0].Type == gwv1.HostnameSubjectAltNameType:
		san, err := encode.Host(string(v.SubjectAltNames[0].Hostname))
		if err != nil {
			bp.notAccepted, bp.message = string(gwv1.PolicyReasonInvalid), "spec.validation.subjectAltNames[0].hostname: "+err.Error()
			return
		}
		verify = san.String()
	case len(v.SubjectAltNames) > 0:
		bp.notAccepted, bp.message = string(gwv1.PolicyReasonInvalid),
			"spec.validation.subjectAltNames: HAProxy checks one host name of a backend's certificate (verifyhost); several subjectAltNames, or a URI one, cannot be checked, so the policy is not applied and its Services answer 503"
		return
	}
	if v.WellKnownCACertificates != nil {
		bp.notAccepted, bp.message = string(gwv1.PolicyReasonInvalid),
			"spec.validation.wellKnownCACertificates: pier does not read the system's CA store; name the CAs in caCertificateRefs"
		return
	}
	bundle, reason, msg := caBundle(snap, bp.p)
	if reason != "" {
		bp.notResolved, bp.message = reason, msg
	}
	if bundle == nil {
		bp.notAccepted = string(gwv1.BackendTLSPolicyReasonNoValidCACertificate)
		if bp.message == "" {
			bp.message = "spec.validation.caCertificateRefs: no CA certificate"
		}
		return
	}
	u := &model.UpstreamTLS{Verify: true, SNI: true, Name: host.String(), Namespace: bp.p.Namespace,
		CASHA256: bundle.SHA256, CAPEM: string(bundle.PEM)}
	if verify != u.Name {
		u.VerifyHost = verify
	}
	bp.tls = u
}

// caBundle is the CA bundle of the policy's caCertificateRefs: the ca.crt
// of each valid one, together. A ref that is not a core ConfigMap, not
// found or without a valid ca.crt makes ResolvedRefs false (the first
// such reason and message), and is left out; nil when none is valid.
func caBundle(snap *source.Snapshot, p *gwv1.BackendTLSPolicy) (*tlscert.CABundle, string, string) {
	var reason, msg string
	fail := func(r, m string) {
		if reason == "" {
			reason, msg = r, m
		}
	}
	var pem []byte
	for i, ref := range p.Spec.Validation.CACertificateRefs {
		field := fmt.Sprintf("spec.validation.caCertificateRefs[%d]", i)
		if ref.Group != "" || ref.Kind != "ConfigMap" {
			fail(string(gwv1.BackendTLSPolicyReasonInvalidKind), field+": only core ConfigMaps are supported")
			continue
		}
		cm := snap.ConfigMap(p.Namespace, string(ref.Name))
		if cm == nil {
			fail(string(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef), fmt.Sprintf("%s: config map %s/%s not found", field, p.Namespace, ref.Name))
			continue
		}
		b, err := tlscert.ParseCA([]byte(cm.Data["ca.crt"]))
		if err != nil {
			fail(string(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef), fmt.Sprintf("%s: config map %s/%s: ca.crt: %v", field, p.Namespace, ref.Name, err))
			continue
		}
		pem = append(pem, b.PEM...)
	}
	if len(pem) == 0 {
		return nil, reason, msg
	}
	b, err := tlscert.ParseCA(pem)
	if err != nil { // each part parsed: only the bundle's size can fail
		return nil, string(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef), "spec.validation.caCertificateRefs: " + err.Error()
	}
	return b, reason, msg
}

// forPort is the policy for a Service port (one naming the port, else
// one of the whole Service) and every policy targeting it there (for
// their status); nil when none.
func (b *backendTLS) forPort(ns, svc, portName string) (*backendTLSPolicy, []*backendTLSPolicy) {
	if b == nil {
		return nil, nil
	}
	var named []*backendTLSPolicy
	if portName != "" {
		named = b.byTarget[targetKey(ns, svc, portName)]
	}
	whole := b.byTarget[targetKey(ns, svc, "")]
	all := append(slices.Clone(named), whole...)
	switch {
	case len(named) > 0:
		return named[0], all
	case len(whole) > 0:
		return whole[0], all
	}
	return nil, nil
}

// reached records that a Gateway of ours reaches policies' Services.
func (b *backendTLS) reached(gw model.ObjectRef, policies []model.ObjectRef) {
	for _, ref := range policies {
		for _, bp := range b.all {
			if bp.ref == ref && !slices.Contains(bp.ancestors, gw) {
				bp.ancestors = append(bp.ancestors, gw)
			}
		}
	}
}

// status is the policies' status.ancestors entries of ours: one per
// Gateway that reaches their Services.
func (b *backendTLS) status(opts translate.Options, st *translate.GatewayStatus) {
	for _, bp := range b.all {
		if len(bp.ancestors) == 0 {
			continue
		}
		gen := bp.p.Generation
		accepted := condition(gen, string(gwv1.PolicyConditionAccepted), true, string(gwv1.PolicyReasonAccepted), "")
		switch {
		case bp.conflicted:
			accepted = condition(gen, string(gwv1.PolicyConditionAccepted), false, string(gwv1.PolicyReasonConflicted),
				"an older BackendTLSPolicy targets the same Service and sectionName")
		case bp.notAccepted != "":
			accepted = condition(gen, string(gwv1.PolicyConditionAccepted), false, bp.notAccepted, bp.message)
		}
		resolved := condition(gen, string(gwv1.BackendTLSPolicyConditionResolvedRefs), true, string(gwv1.BackendTLSPolicyReasonResolvedRefs), "")
		if bp.notResolved != "" {
			resolved = condition(gen, string(gwv1.BackendTLSPolicyConditionResolvedRefs), false, bp.notResolved, bp.message)
		}
		var out []gwv1.PolicyAncestorStatus
		for _, gw := range bp.ancestors {
			group, kind, ns := gwv1.Group(gwv1.GroupName), gwv1.Kind(model.KindGateway), gwv1.Namespace(gw.Namespace)
			out = append(out, gwv1.PolicyAncestorStatus{
				AncestorRef:    gwv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gwv1.ObjectName(gw.Name)},
				ControllerName: gwv1.GatewayController(opts.GatewayControllerName),
				Conditions:     []metav1.Condition{accepted, resolved},
			})
		}
		st.Policies[bp.ref] = out
	}
}

// withBackendTLS is a Service's pool under a policy: a pool of its own
// (Ingresses share the Service's plain one) speaking verified TLS, or,
// for a policy that cannot be applied, one without members (503).
func withBackendTLS(pool *model.Pool, bp *backendTLSPolicy) *model.Pool {
	if pool == nil || bp == nil {
		return pool
	}
	p := *pool
	if bp.tls == nil {
		p.ID = model.ID("gateway-backendtls-refused", pool.ID, bp.ref.Namespace, bp.ref.Name)
		p.Name = p.Namespace + "_tlsrefused_" + p.ID[:8]
		p.Members = nil
		return &p
	}
	u := *bp.tls
	p.ID = model.ID("gateway-backendtls", pool.ID, u.Name, u.VerifyHost, u.CASHA256)
	p.Name = p.Namespace + "_tls_" + p.ID[:8]
	p.Protocol, p.UpstreamTLS = model.BackendHTTPS, &u
	return &p
}
