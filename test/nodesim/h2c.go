package nodesim

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

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
	port := defaultH2CPort
	if v := env["H2C_PORT"]; v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return configError{fmt.Errorf("H2C_PORT=%q is not a port number", v)}
		}
		port = p
	}
	if !b.pooled || port == b.port {
		return nil
	}
	addr := netip.AddrPortFrom(b.ip, uint16(port)).String()
	var lc net.ListenConfig
	ln, err := lc.Listen(s.ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	log := s.log.With("namespace", pod.Namespace, "pod", pod.Name)
	cfg.H2COnly = true
	go func() {
		defer close(done)
		if err := echo.Serve(ctx, ln, cfg, log); err != nil {
			log.Warn("nodesim: h2c echo backend ended", "err", err)
		}
	}()
	b.alsoStops(cancel, done)
	return nil
}
