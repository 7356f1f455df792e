// Package fuzz holds whole-pipeline fuzz targets: Kubernetes objects go
// through translation and rendering, and properties (no injected line or
// word, a victim untouched, printable problems) are checked on the HAProxy
// files that come out. `go test ./test/fuzz` runs the seed corpus (the
// injection payloads of seeds_test.go). To explore:
//
//	go test ./test/fuzz -run '^$' -fuzz '^FuzzIngressToConfig$' -fuzztime 60s -fuzzminimizetime 1x
//
// -fuzzminimizetime 1x matters for FuzzTranslateNeverPanics: early on
// nearly every mutation of a manifest finds new YAML-parser coverage,
// and the default 60 s minimisation of each leaves no time to fuzz.
package fuzz

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/internal/translate"
)

// attack is what the fuzzer controls: the user-derived fields of one
// Ingress. An empty annotation value means "annotation absent", an empty
// pathType means "pathType not set", an empty port name means "port
// number 80" and an empty TLS host means "no spec.tls".
type attack struct {
	host, path, pathType               string
	group, balance, health, externalIP string
	tlsHost, service, port             string
	// extra are more annotations (FuzzNginxAnnotationsToConfig).
	extra map[string]string
}

const (
	className       = "pier"
	attackerNS      = "attacker"
	victimNS        = "victim"
	victimUID       = "0b7d9c2e-1f3a-4c5d-8e6f-7a8b9c0d1e2f"
	attackerUID     = "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716"
	attackerTLSName = "attacker-tls"
	victimTLSName   = "victim-tls"
)

// epoch is the attacker's creation time; the victim is one minute
// younger, so every "oldest wins" rule would favour the attacker if the
// two ever met.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Certificates are generated once per process: key generation per exec
// would dominate the fuzzing budget.
var (
	certsOnce                sync.Once
	attackerCrt, attackerKey []byte
	victimCrt, victimKey     []byte
)

func certs() {
	certsOnce.Do(func() {
		notAfter := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
		var err error
		if attackerCrt, attackerKey, err = tlscert.SelfSigned([]string{"a.example"}, notAfter); err != nil {
			panic(err)
		}
		if victimCrt, victimKey, err = tlscert.SelfSigned([]string{"victim.example"}, notAfter); err != nil {
			panic(err)
		}
	})
}

func translateOptions() translate.Options {
	o := translate.DefaultOptions()
	o.Now = epoch
	return o
}

// snapshot builds the objects: the pier IngressClass, the victim's
// Ingress, Service, EndpointSlice and Secret, and, when a is not nil, the
// attacker's.
func snapshot(t testing.TB, a *attack) *source.Snapshot {
	certs()
	snap := &source.Snapshot{
		IngressClasses: []*networkingv1.IngressClass{{
			ObjectMeta: metav1.ObjectMeta{Name: className},
			Spec:       networkingv1.IngressClassSpec{Controller: translate.DefaultControllerName},
		}},
	}
	prefix := networkingv1.PathTypePrefix
	victim := ingress(victimNS, "shop", victimUID, epoch.Add(time.Minute), "victim.example", "/", &prefix, "web", "")
	victim.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"victim.example"}, SecretName: victimTLSName}}
	addBackend(snap, victimNS, "web", "", "10.244.1.10")
	snap.Secrets = append(snap.Secrets, tlsSecret(victimNS, victimTLSName, victimCrt, victimKey))
	snap.Ingresses = append(snap.Ingresses, victim)
	if a == nil {
		return snap
	}
	var pt *networkingv1.PathType
	if a.pathType != "" {
		v := networkingv1.PathType(a.pathType)
		pt = &v
	}
	evil := ingress(attackerNS, "evil", attackerUID, epoch, a.host, a.path, pt, a.service, a.port)
	evil.Annotations = map[string]string{}
	for key, v := range map[string]string{
		annotation.LoadBalancer: a.group,
		annotation.Balance:      a.balance,
		annotation.HealthCheck:  a.health,
		annotation.ExternalIP:   a.externalIP,
	} {
		if v != "" {
			evil.Annotations[key] = v
		}
	}
	for key, v := range a.extra {
		evil.Annotations[key] = v
	}
	if a.tlsHost != "" {
		evil.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{a.tlsHost}, SecretName: attackerTLSName}}
	}
	snap.Ingresses = append(snap.Ingresses, evil)
	addBackend(snap, attackerNS, a.service, a.port, "10.244.0.5")
	if hasDefaultBackend(evil) && a.service != attackerErrorsName {
		addBackend(snap, attackerNS, attackerErrorsName, "http", "10.244.0.6")
	}
	snap.Secrets = append(snap.Secrets, tlsSecret(attackerNS, attackerTLSName, attackerCrt, attackerKey))
	if _, _, ok := annotation.AuthSecret(evil); ok {
		snap.Secrets = append(snap.Secrets, authUsersSecret(attackerNS, attackerAuthName))
	}
	for _, ref := range annotation.ConfigMaps(evil) {
		snap.ConfigMaps = append(snap.ConfigMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
			Data: map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store, max-age=0"}})
	}
	if ns, name, ok := annotation.ProxySSLSecret(evil); ok {
		// A CA (the attacker's self-signed certificate) and a client pair.
		sec := tlsSecret(ns, name, attackerCrt, attackerKey)
		sec.Type = corev1.SecretTypeOpaque
		sec.Data["ca.crt"] = sec.Data[corev1.TLSCertKey]
		snap.Secrets = append(snap.Secrets, sec)
	}
	return snap
}

// attackerErrorsName is the attacker's default-backend Service, which
// exists when the attacker names default-backend under either prefix.
const attackerErrorsName = "errors"

func hasDefaultBackend(ing *networkingv1.Ingress) bool {
	_, nginx := ing.Annotations[annotation.NginxPrefix+"default-backend"]
	_, pier := ing.Annotations[annotation.Prefix+"default-backend"]
	return nginx || pier
}

// attackerAuthName holds the users of the attacker's basic auth, when
// its annotations ask for it: one user with a bcrypt hash.
const attackerAuthName = "basic-auth"

func authUsersSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"auth": []byte("alice:$2y$05$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C\n")},
	}
}

func ingress(ns, name, uid string, created time.Time, host, path string, pt *networkingv1.PathType,
	svc, port string) *networkingv1.Ingress {
	class := className
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc}}
	if port == "" {
		backend.Service.Port.Number = 80
	} else {
		backend.Service.Port.Name = port
	}
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
			CreationTimestamp: metav1.NewTime(created)},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: path, PathType: pt, Backend: backend,
				}}},
			}}},
		},
	}
}

// addBackend adds a Service with one port (named portName, number 80) and
// an EndpointSlice with one ready endpoint on 8080, under whatever name
// the Ingress uses, so that a valid name resolves to a real member.
func addBackend(snap *source.Snapshot, ns, name, portName, addr string) {
	snap.Services = append(snap.Services, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Name: portName, Port: 80, Protocol: corev1.ProtocolTCP}}},
	})
	pn, pp, proto := portName, int32(8080), corev1.ProtocolTCP
	snap.EndpointSlices = append(snap.EndpointSlices, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slice-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pn, Port: &pp, Protocol: &proto}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
	})
}

func tlsSecret(ns, name string, crt, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
}
