package lint

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/source"
)

// snapshotSecrets gives the driver the Secrets of the snapshot, as pier
// run's in-memory view gives its agent those of the newest one.
type snapshotSecrets struct{ snap *source.Snapshot }

func (s snapshotSecrets) TLSPair(namespace, name string) (certPEM, keyPEM []byte, err error) {
	sec := s.snap.Secret(namespace, name)
	if sec == nil {
		return nil, nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	return sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey], nil
}

func (s snapshotSecrets) ConfigMapData(namespace, name string) (map[string]string, error) {
	cm := s.snap.ConfigMap(namespace, name)
	if cm == nil {
		return nil, fmt.Errorf("config map %s/%s not found", namespace, name)
	}
	return cm.Data, nil
}

func (s snapshotSecrets) Data(namespace, name string) (map[string][]byte, error) {
	sec := s.snap.Secret(namespace, name)
	if sec == nil {
		return nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	return sec.Data, nil
}
