package badinput

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/test/harness"
)

// runTCPRoutes: hostile strings in a TCPRoute or its Gateway (a Service
// name or namespace, a parentRef's sectionName, a listener name, each
// with ";evil" or a newline and a directive) are refused with a reason
// and reach no file; a TCPRoute naming the victim's own Service from
// another namespace without a ReferenceGrant is RefNotPermitted. A
// Gateway still served gets a load balancer whose TCP listener refuses
// every connection; the victim is untouched throughout.
func (b *bench) runTCPRoutes(t *testing.T) {
	cases := []struct {
		name, listener, section, backend, backendNS string
		log, reason                                 string // the problem logged; "" for the listener's own status
		served                                      bool   // the Gateway gets a load balancer
	}{
		{"service-name", "tcp", "tcp", "app;evil", "", "tcproute warning", "BackendNotFound", true},
		{"service-newline", "tcp", "tcp", "app\n    server x 10.0.0.1:1", "", "tcproute warning", "BackendNotFound", true},
		{"namespace", "tcp", "tcp", "app", "victim;evil", "tcproute warning", "BackendNotFound", true},
		{"section-name", "tcp", "tcp;evil", "app", "", "", "", true},
		{"listener-name", "tcp;evil", "tcp;evil", "app", "", "gateway refused", "Invalid", false},
		{"victim-service", "tcp", "tcp", "app", victimNS, "tcproute warning", "RefNotPermitted", true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := fmt.Sprintf("evil-tcp-%d", i)
			port := harness.FreePort(t)
			ref := "{name: " + strconv.Quote(c.backend) + ", port: 80}"
			if c.backendNS != "" {
				ref = "{name: " + strconv.Quote(c.backend) + ", namespace: " + strconv.Quote(c.backendNS) + ", port: 80}"
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
  listeners: [{name: ` + strconv.Quote(c.listener) + `, protocol: TCP, port: ` + strconv.Itoa(port) + `}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: evil, namespace: ` + ns + `}
spec:
  parentRefs: [{name: gw, sectionName: ` + strconv.Quote(c.section) + `}]
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
			l := gw.Status.Listeners[0]
			if c.log != "" && !b.loggedProblem(t, c.log, c.reason) {
				t.Errorf("no %q log line with reason %s", c.log, c.reason)
			}
			if c.name == "section-name" && l.AttachedRoutes != 0 {
				t.Errorf("a parentRef to sectionName \"tcp;evil\" attached: %+v", l)
			}
			newLBs := 0
			if c.served {
				newLBs = 1
				var vip string
				harness.WaitFor(t, 20*time.Second, ns+"/gw served", func() bool {
					vip = b.gatewayAddress(ns, "gw")
					return vip != ""
				})
				if reply, err := tcpSay(vip, port); err == nil || !(errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")) {
					t.Errorf("the TCP listener answered %q (%v), want the connection refused", reply, err)
				}
			}
			b.checkIsolated(t, before, newLBs, globalMarkers)
		})
	}
}

// gateway reads a Gateway with pier's status from the API, or nil.
func (b *bench) gateway(ns, name string) *gwv1.Gateway {
	resp, err := http.Get("http://" + b.p.API + "/gateways/" + ns + "/" + name)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var gw gwv1.Gateway
	if json.NewDecoder(resp.Body).Decode(&gw) != nil {
		return nil
	}
	return &gw
}

// gatewayAddress is the Gateway's first address once it is programmed.
func (b *bench) gatewayAddress(ns, name string) string {
	gw := b.gateway(ns, name)
	if gw == nil || len(gw.Status.Addresses) == 0 {
		return ""
	}
	return gw.Status.Addresses[0].Value
}

// loggedProblem reports whether pier logged msg with reason.
func (b *bench) loggedProblem(t *testing.T, msg, reason string) bool {
	t.Helper()
	f, err := os.Open(b.p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct{ Msg, Reason string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == msg && l.Reason == reason {
			return true
		}
	}
	return false
}

// tcpSay sends a line over a new connection and reads one back.
func tcpSay(addr string, port int) (string, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}
