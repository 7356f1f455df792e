package nodesim

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Upstream's echo-basic with UDP_ECHO_SERVER set answers every datagram
// on UDP_PORT (8080) with one datagram of JSON: the payload it got and
// the Pod's identity, which the Gateway suite's UDPRoute tests read to
// know which Service answered. No TCP port is served then, and the Pod
// has no readiness probe upstream, so it is Ready once it listens.

const defaultUDPEchoPort = 8080

// udpEchoAnswer is the JSON datagram every datagram gets.
type udpEchoAnswer struct {
	Request   string `json:"request"`
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
}

// udpEchoMode reports whether env asks echo-basic for its UDP mode and,
// if so, the port.
func udpEchoMode(env map[string]string) (port int, ok bool, err error) {
	if env["UDP_ECHO_SERVER"] == "" {
		return 0, false, nil
	}
	port, err = envPort(env, "UDP_PORT", defaultUDPEchoPort)
	return port, true, err
}

// serveUDPEcho answers datagrams on b's address and port until b stops.
func (s *Sim) serveUDPEcho(b *backend, pod *corev1.Pod, env map[string]string) error {
	addr := netip.AddrPortFrom(b.ip, uint16(b.port)).String()
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(s.ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("listen udp %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	b.cancel, b.done, b.started = cancel, make(chan struct{}), time.Now()
	go func() {
		<-ctx.Done()
		pc.Close()
	}()
	who := udpEchoAnswer{Namespace: env["NAMESPACE"], Ingress: env["INGRESS_NAME"], Service: env["SERVICE_NAME"], Pod: env["POD_NAME"]}
	go func() {
		defer close(b.done)
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			answer := who
			answer.Request = string(buf[:n])
			out, err := json.Marshal(answer)
			if err != nil {
				continue
			}
			_, _ = pc.WriteTo(out, from)
		}
	}()
	s.log.Debug("nodesim: echo-basic UDP mode", "namespace", pod.Namespace, "pod", pod.Name, "addr", addr)
	return nil
}
