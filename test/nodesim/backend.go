package nodesim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"pier.dev/pier/internal/echo"
)

// probeTimeout bounds the readiness probe of a fresh backend; it answers
// from the same process, so anything slow is a failure.
const probeTimeout = 5 * time.Second

// backend is one Pod's echo server.
type backend struct {
	uid     types.UID
	ip      netip.Addr
	port    int
	pooled  bool // ip came from the allocator (not the Node's, for hostNetwork)
	started time.Time
	stopAt  time.Time // set once the Pod is going away
	cancel  context.CancelFunc
	done    chan struct{} // closed when the server has shut down
}

// serveAlso serves the echo on a second listener of the Pod (its TLS or
// h2c port) until b stops; b's stop waits for it too.
func (s *Sim) serveAlso(b *backend, ln net.Listener, cfg echo.Config, pod *corev1.Pod, what string) {
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	log := s.log.With("namespace", pod.Namespace, "pod", pod.Name)
	go func() {
		defer close(done)
		if err := echo.Serve(ctx, ln, cfg, log); err != nil {
			log.Warn("nodesim: "+what+" echo backend ended", "err", err)
		}
	}()
	b.alsoStops(cancel, done)
}

// alsoStops makes b's stop also cancel a second server of the Pod and
// wait for its done.
func (b *backend) alsoStops(cancel context.CancelFunc, done <-chan struct{}) {
	firstCancel, firstDone := b.cancel, b.done
	both := make(chan struct{})
	go func() {
		<-firstDone
		<-done
		close(both)
	}()
	b.cancel = func() { firstCancel(); cancel() }
	b.done = both
}

// listenAt opens a TCP listener on ip and port: a Pod's second or third
// server (TLS, h2c) beside the one listen arms b's stop for.
func (s *Sim) listenAt(ip netip.Addr, port int) (net.Listener, error) {
	addr := netip.AddrPortFrom(ip, uint16(port)).String()
	var lc net.ListenConfig
	ln, err := lc.Listen(s.ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// envPort is the port the environment variable name gives, def when it is
// unset; anything but a port number is the Pod's error, as echo-basic
// exits on it.
func envPort(env map[string]string, name string, def int) (int, error) {
	v := env[name]
	if v == "" {
		return def, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		return 0, configError{fmt.Errorf("%s=%q is not a port number", name, v)}
	}
	return p, nil
}

// configError is a Pod the kubelet could not start as specified; retrying
// does not help until the Pod changes.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// startBackend gives pod an address, listens on it and returns once the
// server answers its health path: Ready in the status is true readiness.
func (s *Sim) startBackend(pod *corev1.Pod, node simNode) (*backend, error) {
	b := &backend{uid: pod.UID, port: containerPort(pod), ip: node.ip}
	if !pod.Spec.HostNetwork {
		ip, err := s.ipam.Assign(string(pod.UID))
		if err != nil {
			return nil, err
		}
		b.ip, b.pooled = ip, true
	}
	env, err := s.podEnv(pod, b.ip, node.ip)
	if err != nil {
		s.releaseAddr(b)
		return nil, err
	}
	served, err := s.serveEchoBasicMode(b, pod, env)
	if err != nil {
		s.releaseAddr(b)
		return nil, err
	}
	if served {
		return b, nil
	}
	if err := s.serve(b, echoConfig(pod, env), pod); err != nil {
		s.releaseAddr(b)
		return nil, err
	}
	if certFile, keyFile, ok := tlsFiles(env); ok {
		if err := s.serveTLS(b, echoConfig(pod, env), pod, env, certFile, keyFile); err != nil {
			s.stopBackend(b)
			return nil, err
		}
	}
	if err := s.serveH2C(b, echoConfig(pod, env), pod, env); err != nil {
		s.stopBackend(b)
		return nil, err
	}
	if err := probe(s.ctx, b); err != nil {
		s.stopBackend(b)
		return nil, err
	}
	return b, nil
}

// serveEchoBasicMode serves the Pod as echo-basic's gRPC, TCP or UDP
// mode when its environment asks for one, in the order echo-basic checks
// them (else HTTP, the caller's). None has an HTTP readiness probe
// upstream: such a Pod is Ready once it listens. The TCP mode is also a
// member that refuses its Service's port when TCP_PORT says another
// (HTTPRouteRetryConnectionError).
func (s *Sim) serveEchoBasicMode(b *backend, pod *corev1.Pod, env map[string]string) (bool, error) {
	if plain, tlsPort, ok, err := grpcEchoMode(env); ok || err != nil {
		if err != nil {
			return true, err
		}
		b.port = plain
		return true, s.serveGRPCEcho(b, pod, env, tlsPort)
	}
	if plain, tlsPort, ok, err := tcpEchoMode(env); ok || err != nil {
		if err != nil {
			return true, err
		}
		b.port = plain
		return true, s.serveTCPEcho(b, pod, env, tlsPort)
	}
	if port, ok, err := udpEchoMode(env); ok || err != nil {
		if err != nil {
			return true, err
		}
		b.port = port
		return true, s.serveUDPEcho(b, pod, env)
	}
	return false, nil
}

// podEnv is the first container's environment, resolved.
func (s *Sim) podEnv(pod *corev1.Pod, podIP, hostIP netip.Addr) (map[string]string, error) {
	if len(pod.Spec.Containers) == 0 {
		return nil, configError{errors.New("pod has no containers")}
	}
	env, err := containerEnv(pod, &pod.Spec.Containers[0], podAddrs{podIP: podIP.String(), hostIP: hostIP.String()})
	if err != nil {
		return nil, configError{err}
	}
	return env, nil
}

// listen opens b's address and port and arms b's stop: the context its
// server runs under, cancelled by stopBackend, which then waits for done.
func (s *Sim) listen(b *backend) (net.Listener, context.Context, error) {
	ln, err := s.listenAt(b.ip, b.port)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	b.cancel, b.done, b.started = cancel, make(chan struct{}), time.Now()
	return ln, ctx, nil
}

func (s *Sim) serve(b *backend, cfg echo.Config, pod *corev1.Pod) error {
	ln, ctx, err := s.listen(b)
	if err != nil {
		return err
	}
	log := s.log.With("namespace", pod.Namespace, "pod", pod.Name)
	go func() {
		defer close(b.done)
		if err := echo.Serve(ctx, ln, cfg, log); err != nil {
			log.Warn("nodesim: echo backend ended", "err", err)
		}
	}()
	return nil
}

// stopBackend returns once the listener is closed: from then on the
// address refuses connections.
func (s *Sim) stopBackend(b *backend) {
	b.cancel()
	<-b.done
	s.releaseAddr(b)
}

func (s *Sim) releaseAddr(b *backend) {
	if b.pooled {
		s.ipam.Release(string(b.uid))
	}
}

// probe is the upstream readiness probe: GET /health until 200.
func probe(ctx context.Context, b *backend) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	url := "http://" + netip.AddrPortFrom(b.ip, uint16(b.port)).String() + echo.HealthPath
	// No keep-alive: an idle probe connection would hold up the backend's
	// graceful shutdown.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("readiness probe %s: %w", url, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// containerPort is the first container's first TCP port, as upstream's
// echo Deployment declares exactly one.
func containerPort(pod *corev1.Pod) int {
	if len(pod.Spec.Containers) > 0 {
		for _, p := range pod.Spec.Containers[0].Ports {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				return int(p.ContainerPort)
			}
		}
	}
	return DefaultPort
}

// checkLocal fails unless the pod CIDR is local: outside a namespace with
// the prefix on lo, pod IPs would be routed off the machine.
func (s *Sim) checkLocal() error {
	addr := netip.AddrPortFrom(s.nodes[0].ip, 0).String()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("nodesim: pod CIDR %s is not local here (run the tests under netns.Main with it on lo): %w",
			s.opts.PodCIDR, err)
	}
	return ln.Close()
}
