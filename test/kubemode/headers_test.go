package kubemode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCustomHeadersConfigMap: an Ingress naming a ConfigMap in
// custom-headers is served (the controller, with exactly deploy/rbac.yaml's
// permissions, can watch the ConfigMap by name; without it the Ingress
// would be refused, "not found", and publish nothing), and an edit of the
// ConfigMap alone rebuilds with reason "configmap".
func TestCustomHeadersConfigMap(t *testing.T) {
	e := newEnv(t)
	e.startAgent()
	maps := e.cs.CoreV1().ConfigMaps(e.ns)
	cm, err := maps.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "security-headers"},
		Data: map[string]string{"X-Frame-Options": "DENY"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.create(e.ingress("web", "web.example", map[string]string{"nginx.ingress.kubernetes.io/custom-headers": "security-headers"}))
	ctl := e.startController("ctl-headers")
	e.waitPublished("web", time.Minute)
	settled(t, ctl)
	before := ctl.metric("pier_rebuilds_total", `reason="configmap"`)
	cm.Data["X-Frame-Options"] = "SAMEORIGIN"
	if _, err := maps.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMetricAbove(t, ctl, "rebuild for the ConfigMap edit", before, "pier_rebuilds_total", `reason="configmap"`)
}
