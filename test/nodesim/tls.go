package nodesim

import (
	"context"
	"crypto/tls"
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
// same Secret keys from the API and serves the same echo over TLS.

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
	c := &pod.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path.Clean(file), path.Clean(m.MountPath)+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel, nil
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key, nil
				}
			}
		}
	}
	return "", "", configError{fmt.Errorf("%s is in no secret volume of the pod", file)}
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
	s.serveAlso(b, tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}}), cfg, pod, "TLS")
	return nil
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
