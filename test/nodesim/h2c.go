package nodesim

import (
	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/echo"
)

// Upstream's echo-basic in HTTP mode also serves the echo in clear-text
// HTTP/2 with prior knowledge on H2C_PORT (3001), answering HTTP/1.x there
// with 400: the member of a Service port whose appProtocol is
// kubernetes.io/h2c (the Gateway suite's HTTPRouteBackendProtocolH2C).

const defaultH2CPort = 3001

// serveH2C serves the echo in h2c on b's address and H2C_PORT, until b
// stops. A Pod on its Node's network (whose address other Pods share) or
// whose HTTP port is that port serves none.
func (s *Sim) serveH2C(b *backend, cfg echo.Config, pod *corev1.Pod, env map[string]string) error {
	port, err := envPort(env, "H2C_PORT", defaultH2CPort)
	if err != nil {
		return err
	}
	if !b.pooled || port == b.port {
		return nil
	}
	ln, err := s.listenAt(b.ip, port)
	if err != nil {
		return err
	}
	cfg.H2COnly = true
	s.serveAlso(b, ln, cfg, pod, "h2c")
	return nil
}
