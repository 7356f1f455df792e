package nodesim

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/echo"
)

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func testPod(env ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "foo-bar-7d9c-x2x4z", Namespace: "conformance-1", UID: "uid-1",
			Labels:      map[string]string{"app": "foo-bar"},
			Annotations: map[string]string{"note": "n"},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-b", ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "ingress-conformance-echo", Image: "echo", Env: env}},
		},
	}
}

var addrs = podAddrs{podIP: "10.244.0.9", hostIP: "10.244.0.3"}

// The upstream Deployment template's environment must give the echo
// backend the identity the conformance runner checks.
func TestUpstreamTemplateEnv(t *testing.T) {
	pod := testPod(
		fieldEnv("POD_NAME", "metadata.name"),
		fieldEnv("NAMESPACE", "metadata.namespace"),
		corev1.EnvVar{Name: "INGRESS_NAME", Value: "foo-bar"},
		corev1.EnvVar{Name: "SERVICE_NAME", Value: "foo-bar-svc"},
	)
	env, err := containerEnv(pod, &pod.Spec.Containers[0], addrs)
	if err != nil {
		t.Fatal(err)
	}
	want := echo.Config{Namespace: "conformance-1", Ingress: "foo-bar", Service: "foo-bar-svc", Pod: "foo-bar-7d9c-x2x4z"}
	if got := echoConfig(pod, env); got != want {
		t.Fatalf("echo config %+v, want %+v", got, want)
	}
}

func TestEchoConfigFallsBackToMetadata(t *testing.T) {
	pod := testPod(corev1.EnvVar{Name: "POD_NAME", Value: "override"})
	env, err := containerEnv(pod, &pod.Spec.Containers[0], addrs)
	if err != nil {
		t.Fatal(err)
	}
	want := echo.Config{Namespace: "conformance-1", Pod: "override"}
	if got := echoConfig(pod, env); got != want {
		t.Fatalf("echo config %+v, want %+v", got, want)
	}
}

func TestFieldRefs(t *testing.T) {
	for path, want := range map[string]string{
		"metadata.name":                "foo-bar-7d9c-x2x4z",
		"metadata.namespace":           "conformance-1",
		"metadata.uid":                 "uid-1",
		"metadata.labels['app']":       "foo-bar",
		"metadata.labels['none']":      "",
		"metadata.annotations['note']": "n",
		"spec.nodeName":                "node-b",
		"spec.serviceAccountName":      "default",
		"status.podIP":                 "10.244.0.9",
		"status.podIPs":                "10.244.0.9",
		"status.hostIP":                "10.244.0.3",
	} {
		pod := testPod(fieldEnv("V", path))
		env, err := containerEnv(pod, &pod.Spec.Containers[0], addrs)
		if err != nil || env["V"] != want {
			t.Errorf("%s = %q, %v; want %q", path, env["V"], err, want)
		}
	}
}

func TestExpansion(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"plain", "plain"},
		{"$(POD_NAME).$(NS)", "foo-bar-7d9c-x2x4z.conformance-1"},
		{"http://$(IP):3000/", "http://10.244.0.9:3000/"},
		{"$(LATER)", "$(LATER)"}, // defined after: not expanded
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$$(POD_NAME)", "$(POD_NAME)"}, // escaped
		{"a$$b", "a$b"},
		{"cost $5", "cost $5"},
		{"$(unterminated", "$(unterminated"},
		{"trailing $", "trailing $"},
	} {
		pod := testPod(
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("NS", "metadata.namespace"),
			fieldEnv("IP", "status.podIP"),
			corev1.EnvVar{Name: "V", Value: tc.value},
			corev1.EnvVar{Name: "LATER", Value: "x"},
		)
		env, err := containerEnv(pod, &pod.Spec.Containers[0], addrs)
		if err != nil || env["V"] != tc.want {
			t.Errorf("%q expands to %q, %v; want %q", tc.value, env["V"], err, tc.want)
		}
	}
}

func TestUnsupportedEnvSources(t *testing.T) {
	cm := corev1.EnvVar{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}
	for name, pod := range map[string]*corev1.Pod{
		"configMapKeyRef": testPod(cm),
		"unknown field":   testPod(fieldEnv("F", "spec.hostname")),
		"envFrom": func() *corev1.Pod {
			p := testPod()
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{Prefix: "X"}}
			return p
		}(),
	} {
		if _, err := containerEnv(pod, &pod.Spec.Containers[0], addrs); err == nil || !strings.Contains(err.Error(), "ingress-conformance-echo") {
			t.Errorf("%s: err = %v, want an error naming the container", name, err)
		}
	}
}

// TestTCPEchoModePorts: echo-basic's TCP mode is TCP_ECHO_SERVER set, on
// TCP_PORT and TLS_PORT (3000 and 8443 by default); a port that is not a
// port number is the Pod's error; without TCP_ECHO_SERVER, HTTP as usual.
func TestTCPEchoModePorts(t *testing.T) {
	for _, tc := range []struct {
		env          map[string]string
		plain, tls   int
		mode, broken bool
	}{
		{map[string]string{"TCP_ECHO_SERVER": "1", "TCP_PORT": "3333"}, 3333, 8443, true, false},
		{map[string]string{"TCP_ECHO_SERVER": "1"}, 3000, 8443, true, false},
		{map[string]string{"TCP_ECHO_SERVER": "1", "TLS_PORT": "9443"}, 3000, 9443, true, false},
		{map[string]string{"TCP_PORT": "3333"}, 0, 0, false, false},
		{map[string]string{"TCP_ECHO_SERVER": "1", "TCP_PORT": "70000"}, 0, 0, true, true},
		{map[string]string{"TCP_ECHO_SERVER": "1", "TCP_PORT": "x"}, 0, 0, true, true},
		{map[string]string{"TCP_ECHO_SERVER": "1", "TLS_PORT": "0"}, 0, 0, true, true},
	} {
		plain, tlsPort, mode, err := tcpEchoMode(tc.env)
		if plain != tc.plain || tlsPort != tc.tls || mode != tc.mode || (err != nil) != tc.broken {
			t.Errorf("%v: %d %d %v %v, want %d %d %v broken=%v", tc.env, plain, tlsPort, mode, err, tc.plain, tc.tls, tc.mode, tc.broken)
		}
	}
}
