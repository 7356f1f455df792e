package nodesim

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// Upstream's echo-basic with GRPC_ECHO_SERVER set is a gRPC server of one
// service, gateway_api_conformance.echo_basic.grpcecho.GrpcEcho: Echo and
// EchoTwo answer with what the request looked like (the method, the
// headers, :authority, the Pod's identity), EchoThree is unimplemented.
// It listens in clear-text HTTP/2 (h2c) on HTTP_PORT (3000) and, with a
// certificate mounted at TLS_SERVER_CERT and TLS_SERVER_PRIV_KEY, over
// TLS with ALPN h2 on HTTPS_PORT (8443). The Gateway suite's GRPCRoute
// tests read the answer to know which backend served a call.
//
// The simulator speaks gRPC on net/http's HTTP/2 server rather than
// through grpc-go: a unary call is a POST of one length-prefixed message
// answered by one message and a grpc-status trailer, and the request is
// an empty message, so a few lines of protowire say the same without
// the service's generated code.

const (
	grpcEchoService     = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"
	defaultGRPCEchoPort = 3000
	defaultGRPCEchoTLS  = 8443
	grpcMaxRequest      = 1 << 20
)

// gRPC status codes the echo answers with.
const (
	grpcOK            = 0
	grpcInvalid       = 3
	grpcUnimplemented = 12
)

// grpcEchoPod is the Context message: who answers.
type grpcEchoPod struct {
	namespace, ingress, service, pod string
}

// grpcEchoMode reports whether env asks echo-basic for its gRPC mode and,
// if so, its ports.
func grpcEchoMode(env map[string]string) (plain, tlsPort int, ok bool, err error) {
	if env["GRPC_ECHO_SERVER"] == "" {
		return 0, 0, false, nil
	}
	if plain, err = envPort(env, "HTTP_PORT", defaultGRPCEchoPort); err != nil {
		return 0, 0, true, err
	}
	if tlsPort, err = envPort(env, "HTTPS_PORT", defaultGRPCEchoTLS); err != nil {
		return 0, 0, true, err
	}
	return plain, tlsPort, true, nil
}

// serveGRPCEcho serves the echo on b's address: h2c on b.port and, when
// env names a certificate, TLS on tlsPort. b's stop closes both servers
// and waits for them.
func (s *Sim) serveGRPCEcho(b *backend, pod *corev1.Pod, env map[string]string, tlsPort int) error {
	who := grpcEchoPod{namespace: env["NAMESPACE"], ingress: env["INGRESS_NAME"], service: env["SERVICE_NAME"], pod: env["POD_NAME"]}
	ln, tln, cert, ctx, err := s.listenWithTLS(b, pod, env, tlsPort)
	if err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	servers := []*http.Server{{Handler: grpcEcho{who: who}, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{ln}
	if cert != nil {
		var h2 http.Protocols
		h2.SetHTTP2(true)
		servers = append(servers, &http.Server{Handler: grpcEcho{who: who, tls: true}, Protocols: &h2, ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, tls.NewListener(tln, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}))
	}
	done := make(chan struct{}, len(servers))
	for i, srv := range servers {
		go func() {
			defer func() { done <- struct{}{} }()
			if err := srv.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Warn("nodesim: gRPC echo ended", "namespace", pod.Namespace, "pod", pod.Name, "err", err)
			}
		}()
	}
	go func() {
		<-ctx.Done()
		for _, srv := range servers {
			srv.Close()
		}
	}()
	go func() {
		for range servers {
			<-done
		}
		close(b.done)
	}()
	s.log.Debug("nodesim: echo-basic gRPC mode", "namespace", pod.Namespace, "pod", pod.Name,
		"addr", ln.Addr().String(), "tls", cert != nil)
	return nil
}

// grpcEcho answers the GrpcEcho service's unary calls.
type grpcEcho struct {
	who grpcEchoPod
	tls bool
}

func (g grpcEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		http.Error(w, "this is a gRPC server", http.StatusUnsupportedMediaType)
		return
	}
	// Trailers-only answers are not needed: a status always goes in the
	// trailers, after the headers and the message if there is one.
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	finish := func(code int, msg string) {
		w.Header().Set("Grpc-Status", strconv.Itoa(code))
		if msg != "" {
			w.Header().Set("Grpc-Message", msg)
		}
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, grpcMaxRequest)); err != nil {
		w.WriteHeader(http.StatusOK)
		finish(grpcInvalid, "reading the request: "+err.Error())
		return
	}
	service, method, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	w.WriteHeader(http.StatusOK)
	if service != grpcEchoService || (method != "Echo" && method != "EchoTwo") {
		finish(grpcUnimplemented, "method "+r.URL.Path+" is not implemented")
		return
	}
	msg := g.response(r)
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	if _, err := w.Write(append(frame, msg...)); err != nil {
		return
	}
	finish(grpcOK, "")
}

// response is the EchoResponse message: assertions (1) holding the
// method (1), the headers (2, as key 1 and value 2), :authority (3), the
// Pod's Context (4: namespace 1, ingress 2, service_name 3, pod 4) and,
// over TLS, the session (5: version 1, negotiated_protocol 2,
// server_name 3, cipher_suite 4).
func (g grpcEcho) response(r *http.Request) []byte {
	var a []byte
	a = appendString(a, 1, r.URL.Path)
	headers := [][2]string{{":authority", r.Host}}
	for k, vs := range r.Header {
		for _, v := range vs {
			headers = append(headers, [2]string{strings.ToLower(k), v})
		}
	}
	sort.Slice(headers, func(i, j int) bool { return headers[i][0] < headers[j][0] })
	for _, h := range headers {
		a = appendMessage(a, 2, appendString(appendString(nil, 1, h[0]), 2, h[1]))
	}
	a = appendString(a, 3, r.Host)
	var c []byte
	c = appendString(c, 1, g.who.namespace)
	c = appendString(c, 2, g.who.ingress)
	c = appendString(c, 3, g.who.service)
	c = appendString(c, 4, g.who.pod)
	a = appendMessage(a, 4, c)
	if g.tls && r.TLS != nil {
		var t []byte
		t = appendString(t, 1, tlsVersionName(r.TLS.Version))
		t = appendString(t, 2, r.TLS.NegotiatedProtocol)
		t = appendString(t, 3, r.TLS.ServerName)
		t = appendString(t, 4, tls.CipherSuiteName(r.TLS.CipherSuite))
		a = appendMessage(a, 5, t)
	}
	return appendMessage(nil, 1, a)
}

// tlsVersionName is the version as echo-basic names it ("TLSv1.3").
func tlsVersionName(v uint16) string {
	return strings.Replace(tls.VersionName(v), "TLS 1.", "TLSv1.", 1)
}

func appendString(b []byte, field protowire.Number, s string) []byte {
	if s == "" {
		return b // proto3: an empty string is not on the wire
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendMessage(b []byte, field protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}
