// Package echo is the demo and test backend behind `pier echo`. It answers
// every request with a JSON description of what it received, field for field
// like the echo server of the Kubernetes Ingress conformance suite
// (kubernetes-sigs/ingress-controller-conformance, images/echoserver), so the
// conformance scenarios can tell which Service and which Pod served a request
// and what the proxy forwarded.
package echo

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/websocket"
)

// DefaultListen is the address used when Config.Listen is empty: the
// container port of the upstream echo server.
const DefaultListen = ":3000"

// HealthPath answers 200 "ok" instead of echoing, for readiness probes.
const HealthPath = "/health"

// WebSocketPath with an Upgrade: websocket request is a WebSocket echo
// (the Gateway API echo's); without one it is echoed as JSON.
const WebSocketPath = "/ws"

// shutdownTimeout bounds how long Run waits for in-flight requests.
const shutdownTimeout = 10 * time.Second

// Config says where to listen and which identity to report. The names play
// the role of the upstream environment (NAMESPACE, INGRESS_NAME,
// SERVICE_NAME, POD_NAME); the CLI maps its flags and environment onto them.
type Config struct {
	Listen    string
	Namespace string
	Ingress   string
	Service   string
	Pod       string
	// ShutdownDelay keeps serving this long after ctx ends, before the
	// graceful shutdown: what a pod's preStop sleep gives a real app, so
	// that load balancers learn of its end (its endpoint goes not ready)
	// before it stops answering.
	ShutdownDelay time.Duration
	// H2COnly serves HTTP/2 in clear with prior knowledge only, as
	// echo-basic's H2C_PORT does: an HTTP/1.x request gets 400, so a
	// proxy that does not speak h2c to the backend fails visibly.
	H2COnly bool
}

// Response is the JSON body of every echoed request. The JSON names are the
// ones the conformance runner decodes; do not rename them.
type Response struct {
	// Path is the raw request URI as received (path and query, unescaped
	// as sent), not a cleaned path: path rules are checked against it.
	Path    string              `json:"path"`
	Host    string              `json:"host"`
	Method  string              `json:"method"`
	Proto   string              `json:"proto"`
	Headers map[string][]string `json:"headers"`

	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
	// TLS is what the connection negotiated when it is TLS, as
	// echo-basic reports it (the suite checks the SNI a proxy sent).
	TLS *TLSInfo `json:"tls,omitempty"`
}

// TLSInfo is echo-basic's "tls" object.
type TLSInfo struct {
	Version            string `json:"version"`
	ServerName         string `json:"serverName"`
	NegotiatedProtocol string `json:"negotiatedProtocol"`
	CipherSuite        string `json:"cipherSuite"`
	// PeerCertificates are the certificates the client presented, each
	// PEM-encoded, leaf first: the suite checks that a proxy presented
	// the client certificate it was given for its backends.
	PeerCertificates []string `json:"peerCertificates,omitempty"`
}

func tlsInfo(cs *tls.ConnectionState) *TLSInfo {
	if cs == nil {
		return nil
	}
	info := &TLSInfo{Version: tls.VersionName(cs.Version), ServerName: cs.ServerName,
		NegotiatedProtocol: cs.NegotiatedProtocol, CipherSuite: tls.CipherSuiteName(cs.CipherSuite)}
	for _, c := range cs.PeerCertificates {
		info.PeerCertificates = append(info.PeerCertificates, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
	}
	return info
}

// Server is the echo http.Handler. It routes by hand rather than with
// http.ServeMux so that no path is cleaned or redirected: the proxy under
// test must see exactly what the client sent, and so must the client.
type Server struct {
	cfg     Config
	log     *slog.Logger
	retries retryCounts
}

// NewServer returns a Server reporting the identity in cfg. A nil logger
// discards logs.
func NewServer(cfg Config, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: logger}
}

// ServeHTTP answers HealthPath with "ok" and echoes everything else. It sets
// no Server header: adding one is the proxy's job (default_backend checks it).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == HealthPath {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", "2")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
		return
	}

	if r.URL.Path == WebSocketPath && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// The Gateway echo's WebSocket endpoint: frames echoed back until
		// the client closes. Any origin (the suite sends a made-up one).
		websocket.Server{Handler: func(ws *websocket.Conn) { _, _ = io.Copy(ws, ws) }}.ServeHTTP(w, r)
		return
	}
	if code, ok := statusPath(r.URL.Path); ok {
		w.WriteHeader(code)
		return
	}
	if code, ok := s.retries.fail(r.URL.Query()); ok {
		// ?delayRetry= holds each failing answer that long, so a test can
		// make the retries outlast a request timeout.
		if err := delay(r.Context(), r.URL.Query().Get("delayRetry")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(code)
		return
	}
	if err := delay(r.Context(), r.URL.Query().Get("delay")); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}

	body, err := json.Marshal(Response{
		Path:      r.RequestURI,
		Host:      r.Host,
		Method:    r.Method,
		Proto:     r.Proto,
		Headers:   r.Header,
		Namespace: s.cfg.Namespace,
		Ingress:   s.cfg.Ingress,
		Service:   s.cfg.Service,
		Pod:       s.cfg.Pod,
		TLS:       tlsInfo(r.TLS),
	})
	if err != nil {
		// Only reachable with a broken header map; say so rather than echo half.
		s.log.Error("encode echo response", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')

	s.log.Debug("echo", "method", r.Method, "uri", r.RequestURI, "host", r.Host, "remote", r.RemoteAddr)
	h := w.Header()
	setEchoHeaders(h, r.Header["X-Echo-Set-Header"])
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	// Explicit, so a large header echo is not sent chunked: the conformance
	// suite expects Content-Length on the response.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// maxRetryIDs bounds the retry simulation's memory: past it, the counts
// start over (a test sends a fresh uuid per probe).
const maxRetryIDs = 10000

// retryCounts is the Gateway API echo's retry simulation: a request with
// ?uuid=<id>&responseCode=<code>&succeedAfter=<n> is answered <code>
// (500-599) the first n times its uuid is seen, each after ?delayRetry=
// if given, then echoed, so a test can tell how many attempts a proxy
// made (the suite's HTTPRouteRetry) and whether it stopped retrying when
// the request's timeout passed.
type retryCounts struct {
	mu   sync.Mutex
	seen map[string]int
}

// fail counts one attempt of the request and returns the status to
// answer while it has not had its n failures; false for a request
// without the simulation's parameters (or with invalid ones).
func (c *retryCounts) fail(q url.Values) (int, bool) {
	id := q.Get("uuid")
	code, err1 := strconv.Atoi(q.Get("responseCode"))
	n, err2 := strconv.Atoi(q.Get("succeedAfter"))
	if id == "" || len(id) > 64 || err1 != nil || err2 != nil || code < 500 || code > 599 || n < 0 || n > 100 {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen) >= maxRetryIDs {
		c.seen = map[string]int{}
	}
	c.seen[id]++
	if c.seen[id] <= n {
		return code, true
	}
	return 0, false
}

// maxDelay bounds ?delay=: a test backend never holds a request longer.
const maxDelay = time.Minute

// statusPath answers the Gateway API echo's /status/<code>: that status,
// no body. Any other path is echoed.
func statusPath(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "/status/")
	if !ok || len(rest) != 3 {
		return 0, false
	}
	code, err := strconv.Atoi(rest)
	if err != nil || code < 200 || code > 599 {
		return 0, false
	}
	return code, true
}

// delay waits for the duration of the Gateway API echo's ?delay= (e.g.
// 10ms, 2s; at most maxDelay), or until the request ends.
func delay(ctx context.Context, v string) error {
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxDelay {
		return fmt.Errorf("delay %q: want a duration up to %s", v, maxDelay)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// setEchoHeaders applies the Gateway API echo's X-Echo-Set-Header request
// headers: each a comma-separated list of "Name: value" set on the
// response (a name seen twice gets its values joined by commas), so a test
// can see what a proxy does to response headers. Names are kept as sent;
// one that is not a valid header name is skipped.
func setEchoHeaders(h http.Header, lists []string) {
	for _, list := range lists {
		for kv := range strings.SplitSeq(list, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(kv), ":")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if !validHeaderName(name) {
				continue
			}
			if len(h[name]) == 0 {
				h[name] = []string{value}
			} else {
				h[name][0] += "," + value
			}
		}
	}
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Run listens on cfg.Listen (DefaultListen if empty) and serves until ctx
// ends, then shuts down gracefully. It returns nil after a clean shutdown.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	addr := cfg.Listen
	if addr == "" {
		addr = DefaultListen
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("echo: listen %s: %w", addr, err)
	}
	return Serve(ctx, ln, cfg, logger)
}

// Serve is Run on a listener the caller opened; it closes ln.
func Serve(ctx context.Context, ln net.Listener, cfg Config, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           NewServer(cfg, logger),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if cfg.H2COnly {
		var p http.Protocols
		p.SetHTTP1(true) // to answer 400 rather than drop the connection
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
		echo := srv.Handler
		srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				http.Error(w, "Expected h2c request", http.StatusBadRequest)
				return
			}
			echo.ServeHTTP(w, r)
		})
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("echo server listening", "addr", ln.Addr().String(),
		"namespace", cfg.Namespace, "ingress", cfg.Ingress, "service", cfg.Service, "pod", cfg.Pod)

	select {
	case err := <-errc:
		return fmt.Errorf("echo: serve: %w", err)
	case <-ctx.Done():
	}

	if cfg.ShutdownDelay > 0 {
		logger.Info("echo server stopping: serving on for the shutdown delay", "delay", cfg.ShutdownDelay)
		select {
		case err := <-errc:
			return fmt.Errorf("echo: serve: %w", err)
		case <-time.After(cfg.ShutdownDelay):
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("echo: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("echo: serve: %w", err)
	}
	logger.Info("echo server stopped", "addr", ln.Addr().String())
	return nil
}
