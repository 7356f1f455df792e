package badinput

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/test/harness"
)

// runTLSRoutes: hostile strings in a TLSRoute or its TLS listener (a
// hostname with ";evil" or a newline and a directive, a Service name
// with ";evil", a listener hostname with a space and a backend name) are
// refused with a reason and reach no file; a TLSRoute naming the
// victim's own Service from another namespace without a ReferenceGrant
// is RefNotPermitted; a tls.mode with ";evil" is refused
// (UnsupportedValue), and tls.mode Terminate without certificateRefs is
// not served (InvalidCertificateRef).
// A Gateway still served gets a load balancer whose TLS listener
// refuses the route's SNI; the victim is untouched throughout.
func (b *bench) runTLSRoutes(t *testing.T) {
	cases := []struct {
		name, listenerHost, mode, host, backend, backendNS string
		log, reason                                        string
		served                                             bool // the Gateway gets a load balancer
	}{
		{"hostname", "", "Passthrough", "a.example;evil", "app", "", "tlsroute refused", "UnsupportedValue", true},
		{"hostname-newline", "", "Passthrough", "a.example\n    server x 10.0.0.1:1", "app", "", "tlsroute refused", "UnsupportedValue", true},
		{"service-name", "", "Passthrough", "a.example", "app;evil", "", "tlsroute warning", "BackendNotFound", true},
		{"listener-hostname", "a.example be_x", "Passthrough", "a.example", "app", "", "gateway refused", "Invalid", false},
		{"mode", "", "Terminate;evil", "a.example", "app", "", "gateway refused", "UnsupportedValue", false},
		{"terminate-no-certificate", "", "Terminate", "a.example", "app", "", "gateway refused", "InvalidCertificateRef", false},
		{"victim-service", "", "Passthrough", "a.example", "app", victimNS, "tlsroute warning", "RefNotPermitted", true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := fmt.Sprintf("evil-tls-%d", i)
			port := harness.FreePort(t)
			ref := "{name: " + strconv.Quote(c.backend) + ", port: 80}"
			if c.backendNS != "" {
				ref = "{name: " + strconv.Quote(c.backend) + ", namespace: " + strconv.Quote(c.backendNS) + ", port: 80}"
			}
			listenerHost := ""
			if c.listenerHost != "" {
				listenerHost = ", hostname: " + strconv.Quote(c.listenerHost)
			}
			doc := `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ` + ns + `}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ` + ns + `}
spec:
  gatewayClassName: ` + ns + `
  listeners: [{name: tls, protocol: TLS, port: ` + strconv.Itoa(port) + listenerHost + `, tls: {mode: ` + c.mode + `}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: evil, namespace: ` + ns + `}
spec:
  parentRefs: [{name: gw}]
  hostnames: [` + strconv.Quote(c.host) + `]
  rules: [{backendRefs: [` + ref + `]}]
`
			a := &attack{ns: ns, files: []string{filepath.Join(b.manifests, "attack-"+ns+".yaml")}}
			before := b.reloads()
			harness.WriteFile(t, a.files[0], doc)
			t.Cleanup(func() { b.withdraw(t, a) })
			var gw *gwv1.Gateway
			harness.WaitFor(t, 15*time.Second, "pier's verdict on "+ns+"/gw", func() bool {
				gw = b.gateway(ns, "gw")
				return gw != nil && len(gw.Status.Listeners) == 1
			})
			if !b.loggedProblem(t, c.log, c.reason) {
				t.Errorf("no %q log line with reason %s", c.log, c.reason)
			}
			newLBs := 0
			if c.served {
				newLBs = 1
				var vip string
				harness.WaitFor(t, 20*time.Second, ns+"/gw served", func() bool {
					vip = b.gatewayAddress(ns, "gw")
					return vip != ""
				})
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", net.JoinHostPort(vip, strconv.Itoa(port)),
					&tls.Config{ServerName: "a.example", InsecureSkipVerify: true})
				if err == nil {
					conn.Close()
					t.Errorf("the TLS listener completed a handshake for a.example, want the connection refused")
				}
			}
			b.checkIsolated(t, before, newLBs, globalMarkers)
		})
	}
}
