package files

import (
	"path/filepath"
	"testing"
)

// The ConfigMaps a Gateway names as client certificate CAs reach the
// snapshot (its own namespace's and another's: the grant is translation's
// question), as the ones an Ingress names do; others do not.
func TestLoadKeepsFrontendCAConfigMaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	writeFile(t, path, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: web}
spec:
  gatewayClassName: pier
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{kind: ConfigMap, group: "", name: ca}]
      perPort:
      - port: 8443
        tls:
          validation:
            caCertificateRefs: [{kind: ConfigMap, group: "", name: ca, namespace: shared}, {kind: Secret, group: "", name: other}]
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ca, namespace: web}
data: {ca.crt: x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ca, namespace: shared}
data: {ca.crt: x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: web}
data: {ca.crt: x}
`)
	snap, problems := mustLoad(t, path)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	if len(snap.ConfigMaps) != 2 || snap.ConfigMap("web", "ca") == nil || snap.ConfigMap("shared", "ca") == nil {
		t.Errorf("config maps %+v", snap.ConfigMaps)
	}
}

// A BackendTLSPolicy reaches the snapshot with the ConfigMap it names as
// its CA (its own namespace's); a ConfigMap nothing names does not.
func TestLoadKeepsBackendTLSPolicies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	writeFile(t, path, `apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: tls, namespace: web}
spec:
  targetRefs: [{group: "", kind: Service, name: app}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: app-ca}]
    hostname: app.web.example
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-ca, namespace: web}
data: {ca.crt: x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-ca, namespace: other}
data: {ca.crt: x}
`)
	snap, problems := mustLoad(t, path)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	if len(snap.BackendTLSPolicies) != 1 || snap.BackendTLSPolicies[0].Spec.Validation.Hostname != "app.web.example" {
		t.Errorf("policies %+v", snap.BackendTLSPolicies)
	}
	if len(snap.ConfigMaps) != 1 || snap.ConfigMap("web", "app-ca") == nil {
		t.Errorf("config maps %+v", snap.ConfigMaps)
	}
}
