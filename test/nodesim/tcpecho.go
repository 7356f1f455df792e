package nodesim

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Upstream's echo-basic with TCP_ECHO_SERVER set serves no HTTP at all
// but a line protocol the Gateway suite's TCP client speaks (its
// TCPRoute and TLSRoute tests): on connect a welcome line, then one
// answer per line received — `PING` gets `PONG`, `IS_TLS` whether the
// connection is TLS, `TEST` one line of JSON naming the Pod and, over
// TLS, the name the client sent (SNI) and what was negotiated; anything
// else gets nothing. It listens on TCP_PORT (3000) and, when
// TLS_SERVER_CERT and TLS_SERVER_PRIV_KEY name a mounted certificate,
// on TLS_PORT (8443) with it too: the member a TLSRoute in Passthrough
// mode reaches, whose JSON proves the client's own TLS session got
// through. A Pod in this mode has no readiness probe upstream, so it is
// Ready once it listens.

const (
	tcpEchoWelcome      = "Gateway API Test TCP Server\n"
	defaultTCPEchoPort  = 3000
	defaultTCPEchoTLS   = 8443
	tcpEchoHandshakeMax = 5 * time.Second
)

// tcpEchoPod is what a TEST answer says about the Pod: the suite checks
// the namespace and that the Pod's name starts with its Deployment's.
type tcpEchoPod struct {
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
	TCPPort   string `json:"tcpport"`
	TLSPort   string `json:"tlsport,omitempty"`
}

// tcpEchoTLS is what a TEST answer over TLS says about the session.
type tcpEchoTLS struct {
	Version            string `json:"version"`
	ServerName         string `json:"serverName"`
	NegotiatedProtocol string `json:"negotiatedProtocol,omitempty"`
	Curves             string `json:"curves,omitempty"`
	CipherSuite        string `json:"cipherSuite"`
}

// tcpEchoAnswer is the JSON line a TEST gets.
type tcpEchoAnswer struct {
	tcpEchoPod
	IsTLS bool        `json:"isTLS"`
	TLS   *tcpEchoTLS `json:"tls,omitempty"`
}

// tcpEchoMode reports whether env asks echo-basic for its TCP mode and,
// if so, the ports it listens on. A port that is not a port number is the
// Pod's error (upstream's server exits on it).
func tcpEchoMode(env map[string]string) (plain, tlsPort int, ok bool, err error) {
	if env["TCP_ECHO_SERVER"] == "" {
		return 0, 0, false, nil
	}
	if plain, err = envPort(env, "TCP_PORT", defaultTCPEchoPort); err != nil {
		return 0, 0, true, err
	}
	if tlsPort, err = envPort(env, "TLS_PORT", defaultTCPEchoTLS); err != nil {
		return 0, 0, true, err
	}
	return plain, tlsPort, true, nil
}

// serveTCPEcho serves echo-basic's TCP mode on b's address: plain on
// b.port, and over TLS on tlsPort when env names a certificate. b's stop
// stops both listeners and every open connection, and waits for them.
func (s *Sim) serveTCPEcho(b *backend, pod *corev1.Pod, env map[string]string, tlsPort int) error {
	who := tcpEchoPod{
		Namespace: env["NAMESPACE"],
		Ingress:   env["INGRESS_NAME"],
		Service:   env["SERVICE_NAME"],
		Pod:       env["POD_NAME"],
		TCPPort:   strconv.Itoa(b.port),
		TLSPort:   strconv.Itoa(tlsPort),
	}
	ln, tln, cert, ctx, err := s.listenWithTLS(b, pod, env, tlsPort)
	if err != nil {
		return err
	}
	listeners := []net.Listener{ln}
	if cert != nil {
		listeners = append(listeners, tls.NewListener(tln, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}))
	}
	done := make(chan struct{}, len(listeners))
	for _, l := range listeners {
		go func() {
			<-ctx.Done()
			l.Close()
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			acceptTCPEcho(ctx, l, who)
		}()
	}
	go func() {
		for range listeners {
			<-done
		}
		close(b.done)
	}()
	s.log.Debug("nodesim: echo-basic TCP mode", "namespace", pod.Namespace, "pod", pod.Name,
		"addr", ln.Addr().String(), "tls", cert != nil)
	return nil
}

// acceptTCPEcho answers every connection l accepts until ctx ends.
func acceptTCPEcho(ctx context.Context, l net.Listener, who tcpEchoPod) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			answerTCPEcho(conn, who)
		}()
	}
}

// answerTCPEcho speaks the protocol on one connection until the client
// closes it.
func answerTCPEcho(conn net.Conn, who tcpEchoPod) {
	answer := tcpEchoAnswer{tcpEchoPod: who}
	if tc, ok := conn.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(context.Background(), tcpEchoHandshakeMax)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return
		}
		st := tc.ConnectionState()
		answer.IsTLS = true
		answer.TLS = &tcpEchoTLS{
			Version:            tls.VersionName(st.Version),
			ServerName:         st.ServerName,
			NegotiatedProtocol: st.NegotiatedProtocol,
			Curves:             st.CurveID.String(),
			CipherSuite:        tls.CipherSuiteName(st.CipherSuite),
		}
	}
	test, err := json.Marshal(answer)
	if err != nil {
		return
	}
	if _, err := fmt.Fprint(conn, tcpEchoWelcome); err != nil {
		return
	}
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		var reply string
		switch lines.Text() {
		case "TEST":
			reply = string(test) + "\n"
		case "IS_TLS":
			reply = strconv.FormatBool(answer.IsTLS) + "\n"
		case "PING":
			reply = "PONG\n"
		default:
			continue
		}
		if _, err := fmt.Fprint(conn, reply); err != nil {
			return
		}
	}
}
