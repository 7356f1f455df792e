package nodesim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// secretFile follows a container file to its Secret key as the kubelet
// mounts it: through the volumeMount and the secret volume's items (or
// the key itself without items); a file outside every secret volume is
// a configuration error.
func TestSecretFile(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{
			{Name: "certs", MountPath: "/etc/secret-volume"}, {Name: "plain", MountPath: "/etc/plain/"}}}},
		Volumes: []corev1.Volume{
			{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls-checks-certificate",
				Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "crt"}, {Key: "tls.key", Path: "key"}}}}},
			{Name: "plain", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other"}}},
		},
	}}
	for file, want := range map[string][2]string{
		"/etc/secret-volume/crt": {"tls-checks-certificate", "tls.crt"},
		"/etc/secret-volume/key": {"tls-checks-certificate", "tls.key"},
		"/etc/plain/tls.crt":     {"other", "tls.crt"},
	} {
		if name, key, err := secretFile(pod, file); err != nil || name != want[0] || key != want[1] {
			t.Errorf("%s: %s %s %v, want %v", file, name, key, err, want)
		}
	}
	for _, file := range []string{"/etc/secret-volume/other", "/etc/elsewhere/crt"} {
		if _, _, err := secretFile(pod, file); err == nil {
			t.Errorf("%s: found", file)
		}
	}
	if _, _, ok := tlsFiles(map[string]string{"TLS_SERVER_CERT": "/a"}); ok {
		t.Error("HTTPS without a key")
	}
}

// configMapFile follows a file to its ConfigMap key the same way, and a
// Secret volume is not a ConfigMap one.
func TestConfigMapFile(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{VolumeMounts: []corev1.VolumeMount{
			{Name: "ca", MountPath: "/etc/configmap-volume"}, {Name: "certs", MountPath: "/etc/secret-volume"}}}},
		Volumes: []corev1.Volume{
			{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "tls-checks-ca-certificate"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca"}}}}},
			{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		},
	}}
	if name, key, err := configMapFile(pod, "/etc/configmap-volume/ca"); err != nil || name != "tls-checks-ca-certificate" || key != "ca.crt" {
		t.Errorf("/etc/configmap-volume/ca: %s %s %v", name, key, err)
	}
	if _, _, err := configMapFile(pod, "/etc/secret-volume/tls.crt"); err == nil {
		t.Error("a file of a secret volume resolved as a config map's")
	}
	if _, _, err := secretFile(pod, "/etc/configmap-volume/ca"); err == nil {
		t.Error("a file of a config map volume resolved as a secret's")
	}
}
