package kubeapi

// What test/cluster (real kubelets in lab namespaces) needs from the control
// plane beyond what the rest of the package offers: kube-scheduler, client
// certificates for kubelets, and a relay that lives as long as the cluster
// rather than one test. Nothing here changes how Start, Main or Shared
// behave for other users.

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Component is a control-plane process started on request (kube-scheduler)
// that Stop does not know about: its starter stops it, before Server.Stop.
type Component struct {
	mu sync.Mutex
	p  *process
}

// Stop ends the process (SIGTERM, then SIGKILL after 10 s). It is safe to
// call more than once and on a nil Component.
func (c *Component) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.p.stop(10 * time.Second)
	c.p = nil
}

// StartScheduler starts kube-scheduler (beside kube-apiserver, built by
// hack/test-apiserver.sh) as the admin, without leader election, and waits
// for its /healthz. Its log is kube-scheduler.log in Dir, kept with the
// others when a run fails. The caller stops it (Component.Stop) before
// stopping the server; Pdeathsig ends it if the test binary dies.
func (s *Server) StartScheduler(ctx context.Context) (*Component, error) {
	bin := filepath.Join(filepath.Dir(s.apiBin), "kube-scheduler")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kubeapi: kube-scheduler: %w (hack/test-apiserver.sh builds it)", err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var ports []int
		if ports, err = freePorts(1); err != nil {
			return nil, fmt.Errorf("kubeapi: kube-scheduler: %w", err)
		}
		var p *process
		p, err = startProcess("kube-scheduler", filepath.Join(s.dir, "kube-scheduler.log"), bin,
			"--kubeconfig="+s.kubeconfig,
			"--authentication-kubeconfig="+s.kubeconfig,
			"--authorization-kubeconfig="+s.kubeconfig,
			"--authentication-skip-lookup=true",
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(ports[0]),
			"--v=1")
		if err != nil {
			return nil, fmt.Errorf("kubeapi: %w", err)
		}
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
		err = p.waitHTTP(ctx, insecureClient(), url, func(code int, _ []byte) bool { return code == http.StatusOK })
		if err == nil {
			return &Component{p: p}, nil
		}
		p.stop(5 * time.Second)
		if !addressInUse(p) {
			break
		}
	}
	return nil, fmt.Errorf("kubeapi: start kube-scheduler: %w", err)
}

// CACert is the PEM certificate of the cluster's CA: it signs the serving
// certificate and every client certificate.
func (s *Server) CACert() []byte { return append([]byte(nil), s.pki.caCert...) }

// ClientCert issues a client certificate (PEM, with its EC key) for the
// user cn in the groups orgs, signed by the cluster's CA: a kubelet's
// identity is ClientCert("system:node:NAME", "system:nodes").
func (s *Server) ClientCert(cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	if s.pki == nil {
		return nil, nil, errNotStarted
	}
	block, _ := pem.Decode(s.pki.caCert)
	keyBlock, _ := pem.Decode(s.pki.caKey)
	if block == nil || keyBlock == nil {
		return nil, nil, errors.New("kubeapi: CA material does not decode")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeapi: parse CA: %w", err)
	}
	caKey, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeapi: parse CA key: %w", err)
	}
	tmpl := template(cn, orgs)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return issue(tmpl, ca, caKey)
}

// StartProxy is NewProxyAt for a relay not bound to one test: it runs
// until Close. test/cluster starts one per test binary, on the lab's host
// link, for kubelets and pods.
func (s *Server) StartProxy(addr string) (*Proxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: proxy: %w", err)
	}
	u, err := url.Parse(s.Host())
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("kubeapi: proxy: %w", err)
	}
	p := &Proxy{l: l, target: u.Host, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Close stops a proxy from StartProxy: the listener and every relayed
// connection are closed when it returns.
func (p *Proxy) Close() { p.close() }

// Process is a child of the test whose output goes to a log file, started
// and stopped as the control plane's own children are (other harnesses'
// daemons: test/cluster's containerd and kubelets).
type Process struct{ p *process }

// StartProcess starts bin with args, its output appended to logPath. The
// kernel kills it if the test binary dies first.
func StartProcess(name, logPath, bin string, args ...string) (*Process, error) {
	p, err := startProcess(name, logPath, bin, args...)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Stop sends SIGTERM, then SIGKILL after grace, and returns once the
// process is gone. A nil Process is a no-op.
func (p *Process) Stop(grace time.Duration) {
	if p != nil {
		p.p.stop(grace)
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.p.exited() }

// Err is Wait's result, once Exited.
func (p *Process) Err() error { return p.p.err }

// LogPath is the file the process writes to.
func (p *Process) LogPath() string { return p.p.logPath }
