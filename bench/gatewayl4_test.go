package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/test/harness"
)

// The Gateway API's layer-4-ish route kinds through `pier run`, each
// beside a hand-written HAProxy config doing the same work and direct to
// the backend: a gRPC unary call (GRPCRoute, h2c), a TLS passthrough
// connection (TLSRoute, SNI in mode tcp) and UDP (UDPRoute, nftables
// DNAT, no HAProxy: pier against direct only). Everything runs in the
// network namespace bench/run.sh gateway-l4 makes for it (the test, its
// backends and clients, pier and HAProxy), so that pier's nftables
// table and its VIPs touch nothing of the host's.
const (
	l4GRPCBackend = 9001
	l4TLSBackend  = 9002
	l4UDPBackend  = 9003
	l4GRPCPort    = 8080 // pier's Gateway listeners
	l4TLSPort     = 8443
	l4UDPPort     = 5300
	l4RefGRPCPort = 18080 // the hand-written config
	l4RefTLSPort  = 18443
	l4GRPCHost    = "grpc.bench.example"
	l4TLSHost     = "www.tls.bench.example"
	l4GRPCMethod  = "/bench.Echo/Get"
)

// l4Manifests: one Gateway per kind, each with its own VIP, as in
// examples/gateway/.
func l4Manifests() string {
	svc := func(name string, port, target int, proto string) string {
		return fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: bench}
spec:
  ports: [{name: p, port: %[2]d, protocol: %[4]s, targetPort: %[3]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %[1]s-a, namespace: bench, labels: {kubernetes.io/service-name: %[1]s}}
addressType: IPv4
ports: [{name: p, port: %[3]d, protocol: %[4]s}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
`, name, port, target, proto)
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: grpc, namespace: bench}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: %d}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo, namespace: bench}
spec:
  parentRefs: [{name: grpc}]
  hostnames: [%s]
  rules:
  - matches: [{method: {service: bench.Echo, method: Get}}]
    backendRefs: [{name: grpc-echo, port: 50051}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tls, namespace: bench}
spec:
  gatewayClassName: pier
  listeners: [{name: apps, protocol: TLS, port: %d, hostname: "*.tls.bench.example", tls: {mode: Passthrough}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: apps, namespace: bench}
spec:
  parentRefs: [{name: tls, sectionName: apps}]
  hostnames: ["*.tls.bench.example"]
  rules: [{backendRefs: [{name: tls-echo, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: udp, namespace: bench}
spec:
  gatewayClassName: pier
  listeners: [{name: echo, protocol: UDP, port: %d}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: echo, namespace: bench}
spec:
  parentRefs: [{name: udp}]
  rules: [{backendRefs: [{name: udp-echo, port: 53}]}]
`, l4GRPCPort, l4GRPCHost, l4TLSPort, l4UDPPort) +
		svc("grpc-echo", 50051, l4GRPCBackend, "TCP") + svc("tls-echo", 443, l4TLSBackend, "TCP") + svc("udp-echo", 53, l4UDPBackend, "UDP")
}

// l4ReferenceConfig is the hand-written HAProxy config doing what pier's
// two HAProxy Gateways do: h2c in (the preface detected on a plain HTTP
// bind, as on pier's HTTP listener) to an h2c server, and SNI routing in
// mode tcp on the ClientHello. Like pier's, it leaves HAProxy its
// default thread count (one per CPU).
func l4ReferenceConfig() string {
	return fmt.Sprintf(`global
  maxconn 4000
defaults
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend grpc
  mode http
  bind 127.0.0.1:%d
  use_backend grpc if { req.hdr(host),field(1,:) -i %s } { path %s }
backend grpc
  mode http
  server s1 127.0.0.1:%d proto h2
frontend tls
  mode tcp
  bind 127.0.0.1:%d
  tcp-request inspect-delay 5s
  tcp-request content accept if { req.ssl_hello_type 1 }
  use_backend tls if { req.ssl_sni -i -m end .tls.bench.example }
backend tls
  mode tcp
  server s1 127.0.0.1:%d
`, l4RefGRPCPort, l4GRPCHost, l4GRPCMethod, l4GRPCBackend, l4RefTLSPort, l4TLSBackend)
}

// l4Codec hands grpc-go the message bytes as they are: no generated code.
type l4Codec struct{}

func (l4Codec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (l4Codec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (l4Codec) Name() string { return "proto" }

// l4Run is one measured run of one kind through one path.
type l4Run struct {
	Round   int     `json:"round"`
	Kind    string  `json:"kind"` // grpc, tls-new, tls-keepalive, udp
	Path    string  `json:"path"` // pier, reference, direct
	Ops     int     `json:"ops"`
	PerSec  float64 `json:"per_s"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	Errors  int     `json:"errors"`
	Lost    int     `json:"lost,omitempty"` // udp: datagrams without a reply in time
	LossPct float64 `json:"loss_pct,omitempty"`
	LoadAvg float64 `json:"load_avg"`
}

// TestGatewayL4 measures, in interleaved rounds, gRPC unary calls, TLS
// passthrough connections (new and kept alive) and UDP round trips
// through pier, a hand-written HAProxy config (not for UDP: HAProxy has
// none) and direct.
func TestGatewayL4(t *testing.T) {
	out := outDir(t)
	if os.Getenv("PIER_BENCH_L4_NETNS") == "" {
		t.Skip("run by bench/run.sh gateway-l4, which gives it a network namespace of its own (pier's VIPs and nftables)")
	}
	requireBinaries(t, "haproxy", "nft")
	rounds, d := envInt("PIER_BENCH_L4_ROUNDS", 5), time.Duration(envInt("PIER_BENCH_L4_SECONDS", 3))*time.Second
	workers := envInt("PIER_BENCH_L4_WORKERS", 16)
	if quick() {
		rounds, d = 1, time.Second
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v %s", err, out)
	}
	startL4GRPCEcho(t)
	startL4TLSEcho(t)
	startL4UDPEcho(t)

	dir := harness.ShortTempDir(t)
	for _, sub := range []string{"manifests", "ref"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	harness.WriteFile(t, filepath.Join(dir, "manifests", "l4.yaml"), l4Manifests())
	logs := startL4Pier(t, dir)
	vips := map[string]string{}
	harness.WaitFor(t, 30*time.Second, "the three Gateways' load balancers serve", func() bool {
		var list struct {
			Items []*model.LoadBalancer `json:"items"`
		}
		if getL4JSON("/loadbalancers", &list) != nil || len(list.Items) != 3 {
			return false
		}
		for _, l := range list.Items {
			if l.VIP == "" || l.Status.State != model.StateActive {
				return false
			}
			vips[strings.TrimPrefix(l.Name, "gateway:bench/")] = l.VIP
		}
		return true
	})
	ref := l4ReferenceConfig()
	refDir := filepath.Join(dir, "ref")
	harness.WriteFile(t, filepath.Join(refDir, "haproxy.conf"), ref)
	startL4HAProxy(t, filepath.Join(refDir, "haproxy.conf"))

	addr := func(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	grpcAddrs := map[string]string{"pier": addr(vips["grpc"], l4GRPCPort), "reference": addr("127.0.0.1", l4RefGRPCPort), "direct": addr("127.0.0.1", l4GRPCBackend)}
	tlsAddrs := map[string]string{"pier": addr(vips["tls"], l4TLSPort), "reference": addr("127.0.0.1", l4RefTLSPort), "direct": addr("127.0.0.1", l4TLSBackend)}
	udpAddrs := map[string]string{"pier": addr(vips["udp"], l4UDPPort), "direct": addr("127.0.0.1", l4UDPBackend)}

	// Every path answers before anything is measured: a failed call here
	// is a broken fixture, not a figure.
	last := ""
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last failure: %s\npier:\n%s", last, logs.String())
		}
	})
	harness.WaitFor(t, 15*time.Second, "every path answers", func() bool {
		for _, p := range []string{"pier", "reference", "direct"} {
			if r := grpcLoad(grpcAddrs[p], 1, 1, 200*time.Millisecond); r.Ops == 0 || r.Errors > 0 {
				last = fmt.Sprintf("grpc %s %s: %+v", p, grpcAddrs[p], r)
				return false
			}
			if err := tlsOnce(tlsAddrs[p], l4TLSHost); err != nil {
				last = fmt.Sprintf("tls %s %s: %v", p, tlsAddrs[p], err)
				return false
			}
		}
		for _, p := range []string{"pier", "direct"} {
			if r := udpLoad(udpAddrs[p], 1, 200*time.Millisecond); r.Ops == 0 || r.Lost > 0 {
				last = fmt.Sprintf("udp %s %s: %+v", p, udpAddrs[p], r)
				return false
			}
		}
		return true
	})
	// The misrouted are refused: an SNI of no route gets no backend.
	if err := tlsOnce(tlsAddrs["pier"], "other.example"); err == nil {
		t.Errorf("pier: a TLS connection with an SNI of no TLSRoute reached a backend")
	}

	type job struct{ kind, path string }
	var jobs []job
	for _, k := range []string{"grpc", "tls-new", "tls-keepalive"} {
		for _, p := range []string{"pier", "reference", "direct"} {
			jobs = append(jobs, job{k, p})
		}
	}
	jobs = append(jobs, job{"udp", "pier"}, job{"udp", "direct"})
	measure := func(j job, d time.Duration) l4Run {
		switch j.kind {
		case "grpc":
			return grpcLoad(grpcAddrs[j.path], workers, 4, d)
		case "tls-new":
			return tlsLoad(tlsAddrs[j.path], workers, false, d)
		case "tls-keepalive":
			return tlsLoad(tlsAddrs[j.path], workers, true, d)
		}
		return udpLoad(udpAddrs[j.path], workers, d)
	}
	for _, j := range jobs {
		measure(j, d/3) // warm-up
	}
	var runs []l4Run
	began := time.Now()
	for round := 1; round <= rounds; round++ {
		order := slices.Clone(jobs)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, j := range order {
			r := measure(j, d)
			r.Round, r.Kind, r.Path, r.LoadAvg = round, j.kind, j.path, loadAvg()
			t.Logf("round %d %-13s %-9s %8.0f /s  p50 %6.3f ms  p99 %6.3f ms  errors %d  lost %d  load %.2f",
				round, r.Kind, r.Path, r.PerSec, r.P50ms, r.P99ms, r.Errors, r.Lost, r.LoadAvg)
			if r.Errors > r.Ops/100 {
				t.Errorf("%s %s round %d: %d errors in %d operations", r.Kind, r.Path, round, r.Errors, r.Ops)
			}
			runs = append(runs, r)
		}
	}
	// pier's rendered configs, beside the reference, for whoever reads
	// the figures: what pier's HAProxy does that the reference does not.
	pierConfigs := map[string]string{}
	confs, _ := filepath.Glob(filepath.Join(dir, "state", "haproxy", "*", "*.conf"))
	confs = append(confs, filepath.Join(dir, "state", "haproxy", "global.conf"))
	for _, f := range confs {
		rel, _ := filepath.Rel(filepath.Join(dir, "state", "haproxy"), f)
		if strings.HasPrefix(rel, "landing") {
			continue // the port-80 landing process: no part of these paths
		}
		if b, err := os.ReadFile(f); err == nil {
			pierConfigs[rel] = string(b)
		}
	}
	writeJSON(t, out, "gateway-l4.json", map[string]any{"pier_configs": pierConfigs,
		"runs": runs, "duration_s": time.Since(began).Seconds(), "seconds_per_run": d.Seconds(),
		"workers": workers, "grpc_connections": 4, "reference_config": ref,
		"grpc": "unary " + l4GRPCMethod + ", 16-byte message echoed, grpc-go with a raw codec, h2c",
		"tls":  "TLS 1.3 to a self-signed backend, SNI " + l4TLSHost + ", 16 bytes written and read back; new: a full handshake per connection",
		"udp":  "16-byte datagram, one flow (connected socket) per worker, reply within 200 ms or lost",
	})
	md := gatewayL4Markdown(runs)
	t.Logf("\n%s", md)
	if err := os.WriteFile(filepath.Join(out, "gateway-l4.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startL4Pier runs `pier run` on dir/manifests, its API on 127.0.0.1:8082.
func startL4Pier(t *testing.T, dir string) *bytes.Buffer {
	pier := exec.Command(harness.PierBin(t), "run", "-f", filepath.Join(dir, "manifests"),
		"--state-dir", filepath.Join(dir, "state"), "--api-addr", "127.0.0.1:8082")
	logs := &bytes.Buffer{}
	pier.Stdout, pier.Stderr = logs, logs
	if err := pier.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pier.Process.Signal(os.Interrupt)
		_ = pier.Wait()
	})
	return logs
}

func startL4HAProxy(t *testing.T, cfg string) {
	if out, err := exec.Command("haproxy", "-c", "-q", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("reference config: %v\n%s", err, out)
	}
	hp := exec.Command("haproxy", "-db", "-f", cfg)
	if err := hp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = hp.Process.Kill()
		_ = hp.Wait()
	})
}

func getL4JSON(path string, v any) error {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://127.0.0.1:8082" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// startL4GRPCEcho: a grpc-go server answering any unary method with the
// request's bytes, over h2c.
func startL4GRPCEcho(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(l4GRPCBackend))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(l4Codec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var msg []byte
		if err := stream.RecvMsg(&msg); err != nil {
			return err
		}
		return stream.SendMsg(&msg)
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
}

// startL4TLSEcho: a TLS server (self-signed, terminating TLS itself as a
// passthrough backend does) echoing what it reads.
func startL4TLSEcho(t *testing.T) {
	certPEM, keyPEM, err := tlscert.SelfSigned([]string{"*.tls.bench.example"}, time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(l4TLSBackend), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

func startL4UDPEcho(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:"+strconv.Itoa(l4UDPBackend))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// l4Load runs workers for d, each calling op in a loop, and sums their
// operations, errors and latencies.
func l4Load(workers int, d time.Duration, op func(w int) (time.Duration, error)) l4Run {
	var mu sync.Mutex
	var lat []float64
	var errs int
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []float64
			bad := 0
			for time.Now().Before(deadline) {
				took, err := op(w)
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, float64(took)/float64(time.Millisecond))
			}
			mu.Lock()
			lat, errs = append(lat, mine...), errs+bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return l4Run{Ops: len(lat), PerSec: float64(len(lat)) / elapsed, P50ms: q(0.50), P99ms: q(0.99), Errors: errs}
}

var l4Payload = []byte("0123456789abcdef")

// grpcLoad: workers unary calls at a time over conns HTTP/2 connections.
func grpcLoad(addr string, workers, conns int, d time.Duration) l4Run {
	var cs []*grpc.ClientConn
	for range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithAuthority(l4GRPCHost), grpc.WithDefaultCallOptions(grpc.ForceCodec(l4Codec{})))
		if err != nil {
			return l4Run{Errors: 1}
		}
		defer c.Close()
		cs = append(cs, c)
	}
	return l4Load(workers, d, func(w int) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		in, reply := l4Payload, []byte(nil)
		began := time.Now()
		err := cs[w%len(cs)].Invoke(ctx, l4GRPCMethod, &in, &reply)
		if err == nil && !bytes.Equal(reply, l4Payload) {
			err = fmt.Errorf("reply %q", reply)
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // a broken path is not a busy loop
		}
		return time.Since(began), err
	})
}

func tlsDial(addr, sni string) (*tls.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp4", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true}) // the backend's self-signed cert
}

func tlsExchange(c *tls.Conn) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(l4Payload); err != nil {
		return err
	}
	buf := make([]byte, len(l4Payload))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if !bytes.Equal(buf, l4Payload) {
		return fmt.Errorf("reply %q", buf)
	}
	return nil
}

// tlsOnce: one connection, handshake and exchange, with sni.
func tlsOnce(addr, sni string) error {
	c, err := tlsDial(addr, sni)
	if err != nil {
		return err
	}
	defer c.Close()
	return tlsExchange(c)
}

// tlsLoad: each worker a full handshake and one exchange per connection,
// or (keepAlive) one connection and exchanges over it; latency is the
// connection's (handshake included) or the exchange's.
func tlsLoad(addr string, workers int, keepAlive bool, d time.Duration) l4Run {
	conns := make([]*tls.Conn, workers)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	return l4Load(workers, d, func(w int) (time.Duration, error) {
		began := time.Now()
		var err error
		if !keepAlive {
			err = tlsOnce(addr, l4TLSHost)
		} else {
			if conns[w] == nil {
				if conns[w], err = tlsDial(addr, l4TLSHost); err != nil {
					conns[w] = nil
					time.Sleep(10 * time.Millisecond)
					return 0, err
				}
				began = time.Now() // the exchange, not the handshake
			}
			if err = tlsExchange(conns[w]); err != nil {
				_ = conns[w].Close()
				conns[w] = nil
			}
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(began), err
	})
}

// udpLoad: each worker one flow (a connected socket), one datagram at a
// time, the next once the reply came or 200 ms passed (lost).
func udpLoad(addr string, workers int, d time.Duration) l4Run {
	conns := make([]net.Conn, workers)
	for w := range conns {
		c, err := net.Dial("udp4", addr)
		if err != nil {
			return l4Run{Errors: 1}
		}
		defer c.Close()
		conns[w] = c
	}
	var mu sync.Mutex
	lost := 0
	r := l4Load(workers, d, func(w int) (time.Duration, error) {
		c := conns[w]
		buf := make([]byte, 64)
		began := time.Now()
		_ = c.SetDeadline(began.Add(200 * time.Millisecond))
		if _, err := c.Write(l4Payload); err != nil {
			time.Sleep(10 * time.Millisecond)
			return 0, err
		}
		n, err := c.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			mu.Lock()
			lost++
			mu.Unlock()
			return 0, err
		}
		if err == nil && !bytes.Equal(buf[:n], l4Payload) {
			err = fmt.Errorf("reply %q", buf[:n])
		}
		return time.Since(began), err
	})
	r.Lost, r.Errors = lost, r.Errors-lost
	if sent := r.Ops + lost; sent > 0 {
		r.LossPct = 100 * float64(lost) / float64(sent)
	}
	return r
}

// gatewayL4Markdown: per kind and path the median over the rounds
// (min–max) of operations/s, p50 and p99, and each round's run divided by
// that round's reference run and direct run, median (min–max).
func gatewayL4Markdown(runs []l4Run) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pick := func(kind, path string) []l4Run {
		var out []l4Run
		for _, r := range runs {
			if r.Kind == kind && r.Path == path {
				out = append(out, r)
			}
		}
		return out
	}
	stat := func(rs []l4Run, f func(l4Run) float64, format string) string {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		if len(xs) == 0 {
			return "–"
		}
		return fmt.Sprintf(format+" ("+format+"–"+format+")", medianOf(xs), slices.Min(xs), slices.Max(xs))
	}
	ratio := func(a, ref []l4Run) string {
		var xs []float64
		for _, x := range a {
			for _, y := range ref {
				if x.Round == y.Round && y.PerSec > 0 {
					xs = append(xs, x.PerSec/y.PerSec)
				}
			}
		}
		if len(xs) == 0 {
			return "–"
		}
		return fmt.Sprintf("**%.2f** (%.2f–%.2f)", medianOf(xs), slices.Min(xs), slices.Max(xs))
	}
	per := func(r l4Run) float64 { return r.PerSec }
	p50 := func(r l4Run) float64 { return r.P50ms }
	p99 := func(r l4Run) float64 { return r.P99ms }
	loss := func(r l4Run) float64 { return r.LossPct }
	units := map[string]string{"grpc": "calls/s", "tls-new": "connections/s", "tls-keepalive": "exchanges/s", "udp": "round trips/s"}
	p("Medians over the rounds (min–max); ratios: each round's run to the same round's reference or direct run, median (min–max).\n\n")
	p("| kind | path | per second | p50 ms | p99 ms | ÷ reference | ÷ direct | errors |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, kind := range []string{"grpc", "tls-new", "tls-keepalive", "udp"} {
		for _, path := range []string{"pier", "reference", "direct"} {
			rs := pick(kind, path)
			if len(rs) == 0 {
				continue
			}
			errs := 0
			for _, r := range rs {
				errs += r.Errors
			}
			p("| %s (%s) | %s | %s | %s | %s | %s | %s | %d |\n", kind, units[kind], path,
				stat(rs, per, "%.0f"), stat(rs, p50, "%.3f"), stat(rs, p99, "%.3f"),
				ratio(rs, pick(kind, "reference")), ratio(rs, pick(kind, "direct")), errs)
		}
	}
	var loads []float64
	for _, r := range runs {
		loads = append(loads, r.LoadAvg)
	}
	if len(loads) > 0 {
		p("\nLoad average (1 min) during the runs: %.2f–%.2f.\n", slices.Min(loads), slices.Max(loads))
	}
	p("\nUDP loss (datagrams without a reply within 200 ms), %% of those sent:\n\n| path | loss %% |\n|---|---:|\n")
	for _, path := range []string{"pier", "direct"} {
		p("| %s | %s |\n", path, stat(pick("udp", path), loss, "%.3f"))
	}
	return b.String()
}
