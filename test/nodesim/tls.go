package nodesim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/echo"
)

// Upstream's echo-basic with TLS_SERVER_CERT and TLS_SERVER_PRIVKEY set
// also serves HTTPS on HTTPS_PORT (8443) with that certificate, read
// from the files of a mounted Secret (the Gateway suite's tls-backend,
// the member TLSRoutes pass connections to). The simulator reads the
// same Secret keys from the API and serves the same echo over TLS. With
// TLS_CLIENT_CACERTS, a file of a mounted ConfigMap, it also verifies a
// client certificate against those CAs when one is presented.

// defaultHTTPSPort is echo-basic's HTTPS_PORT default.
const defaultHTTPSPort = 8443

// tlsFiles reports whether env asks echo-basic for HTTPS.
func tlsFiles(env map[string]string) (cert, key string, ok bool) {
	cert, key = env["TLS_SERVER_CERT"], env["TLS_SERVER_PRIVKEY"]
	return cert, key, cert != "" && key != ""
}

// secretFile is the Secret and key a container file comes from, through
// the container's volumeMounts and the Pod's secret volumes.
func secretFile(pod *corev1.Pod, file string) (secret, key string, err error) {
	return mountedFile(pod, file, func(v corev1.Volume) (string, []corev1.KeyToPath, bool) {
		if v.Secret == nil {
			return "", nil, false
		}
		return v.Secret.SecretName, v.Secret.Items, true
	})
}

// configMapFile is the ConfigMap and key a container file comes from,
// through the container's volumeMounts and the Pod's configMap volumes.
func configMapFile(pod *corev1.Pod, file string) (configMap, key string, err error) {
	return mountedFile(pod, file, func(v corev1.Volume) (string, []corev1.KeyToPath, bool) {
		if v.ConfigMap == nil {
			return "", nil, false
		}
		return v.ConfigMap.Name, v.ConfigMap.Items, true
	})
}

// mountedFile follows file through the first container's volumeMounts to
// a volume that source accepts (its object's name and items), and to the
// key of that object the kubelet writes there.
func mountedFile(pod *corev1.Pod, file string, source func(corev1.Volume) (string, []corev1.KeyToPath, bool)) (name, key string, err error) {
	c := &pod.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path.Clean(file), path.Clean(m.MountPath)+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			name, items, ok := source(v)
			if !ok {
				continue
			}
			if len(items) == 0 {
				return name, rel, nil
			}
			for _, it := range items {
				if it.Path == rel {
					return name, it.Key, nil
				}
			}
		}
	}
	return "", "", configError{fmt.Errorf("%s is in no volume of the pod of that kind", file)}
}

// serveTLS serves the echo over TLS on b's address and HTTPS_PORT, until
// b stops; b's stop waits for it too.
func (s *Sim) serveTLS(b *backend, cfg echo.Config, pod *corev1.Pod, env map[string]string, certFile, keyFile string) error {
	pair, err := s.podKeyPair(pod, certFile, keyFile)
	if err != nil {
		return err
	}
	port, err := envPort(env, "HTTPS_PORT", defaultHTTPSPort)
	if err != nil {
		return err
	}
	ln, err := s.listenAt(b.ip, port)
	if err != nil {
		return err
	}
	conf := &tls.Config{Certificates: []tls.Certificate{pair}}
	if caFile := env["TLS_CLIENT_CACERTS"]; caFile != "" {
		// As echo-basic: a client certificate is checked against these
		// CAs when one is presented, and echoed back (tls.peerCertificates).
		pool, err := s.podCAPool(pod, caFile)
		if err != nil {
			ln.Close()
			return err
		}
		conf.ClientAuth, conf.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	s.serveAlso(b, tls.NewListener(ln, conf), cfg, pod, "TLS")
	return nil
}

// podCAPool is the CA bundle a container reads from the file caFile of
// its mounted ConfigMaps, read from the API.
func (s *Sim) podCAPool(pod *corev1.Pod, caFile string) (*x509.CertPool, error) {
	name, key, err := configMapFile(pod, caFile)
	if err != nil {
		return nil, err
	}
	cm, err := s.client.CoreV1().ConfigMaps(pod.Namespace).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("config map %s/%s: %w", pod.Namespace, name, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[key])) {
		return nil, configError{fmt.Errorf("config map %s/%s: %s holds no PEM certificate", pod.Namespace, name, key)}
	}
	return pool, nil
}

// listenWithTLS opens the two listeners of echo-basic's TCP and gRPC
// modes: b's own (arming b's stop), and, when TLS_SERVER_CERT and
// TLS_SERVER_PRIV_KEY name a mounted certificate, a TCP one on tlsPort
// for the caller to serve TLS on with cert (nil without).
func (s *Sim) listenWithTLS(b *backend, pod *corev1.Pod, env map[string]string, tlsPort int) (ln, tln net.Listener, cert *tls.Certificate, ctx context.Context, err error) {
	if certFile, keyFile := env["TLS_SERVER_CERT"], env["TLS_SERVER_PRIV_KEY"]; certFile != "" && keyFile != "" {
		pair, err := s.podKeyPair(pod, certFile, keyFile)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		cert = &pair
	}
	if ln, ctx, err = s.listen(b); err != nil {
		return nil, nil, nil, nil, err
	}
	if cert != nil {
		if tln, err = s.listenAt(b.ip, tlsPort); err != nil {
			b.cancel()
			ln.Close()
			close(b.done)
			return nil, nil, nil, nil, err
		}
	}
	return ln, tln, cert, ctx, nil
}

// podKeyPair is the certificate and key a container reads from the files
// certFile and keyFile of its mounted Secrets, read from the API.
func (s *Sim) podKeyPair(pod *corev1.Pod, certFile, keyFile string) (tls.Certificate, error) {
	var pem [2][]byte
	for i, f := range []string{certFile, keyFile} {
		name, key, err := secretFile(pod, f)
		if err != nil {
			return tls.Certificate{}, err
		}
		sec, err := s.client.CoreV1().Secrets(pod.Namespace).Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("secret %s/%s: %w", pod.Namespace, name, err)
		}
		if pem[i] = sec.Data[key]; len(pem[i]) == 0 {
			return tls.Certificate{}, configError{fmt.Errorf("secret %s/%s has no %s", pod.Namespace, name, key)}
		}
	}
	pair, err := tls.X509KeyPair(pem[0], pem[1])
	if err != nil {
		return tls.Certificate{}, configError{fmt.Errorf("%s and %s: %w", certFile, keyFile, err)}
	}
	return pair, nil
}
