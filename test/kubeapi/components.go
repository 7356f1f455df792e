package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// startAttempts bounds retries after losing a port race (freePorts).
const startAttempts = 3

func (s *Server) startEtcd(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var ports []int
		if ports, err = freePorts(2); err != nil {
			return fmt.Errorf("kubeapi: etcd: %w", err)
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(s.dir, "etcd-"+strconv.Itoa(attempt))
		var p *process
		p, err = startProcess("etcd", filepath.Join(s.dir, "etcd.log"), "etcd",
			"--name=pier-test", "--data-dir="+dataDir,
			"--listen-client-urls="+client, "--advertise-client-urls="+client,
			"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
			"--initial-cluster=pier-test="+peer, "--initial-cluster-state=new",
			"--logger=zap", "--log-level=warn")
		if err != nil {
			return fmt.Errorf("kubeapi: %w (is etcd installed? hack/test-apiserver.sh installs it)", err)
		}
		err = p.waitHTTP(ctx, nil, client+"/health", func(code int, body []byte) bool {
			return code == http.StatusOK && bytes.Contains(body, []byte(`"health":"true"`))
		})
		if err == nil {
			s.etcdURL = client
			return s.setProcess(&s.etcd, p)
		}
		p.stop(5 * time.Second)
		if !addressInUse(p) {
			break
		}
	}
	return fmt.Errorf("kubeapi: start etcd: %w", err)
}

// startAPIServer picks the port once: RestartAPIServer reuses it so that
// clients holding the old Config reconnect to the new process.
func (s *Server) startAPIServer(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var ports []int
		if ports, err = freePorts(1); err != nil {
			return fmt.Errorf("kubeapi: kube-apiserver: %w", err)
		}
		s.apiPort = ports[0]
		s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
		if err = writeKubeconfig(s.kubeconfig, s.Host(), s.pki); err != nil {
			return fmt.Errorf("kubeapi: %w", err)
		}
		if err = s.runAPIServer(ctx); err == nil || !errors.Is(err, errAddressInUse) {
			return err
		}
	}
	return err
}

var errAddressInUse = errors.New("address in use")

func (s *Server) runAPIServer(ctx context.Context) error {
	if s.opts.AuditPolicy != "" {
		if err := os.WriteFile(s.auditPolicyFile(), []byte(s.opts.AuditPolicy), 0o600); err != nil {
			return fmt.Errorf("kubeapi: audit policy: %w", err)
		}
	}
	p, err := startProcess("kube-apiserver", filepath.Join(s.dir, "kube-apiserver.log"), s.apiBin,
		s.apiServerArgs()...)
	if err != nil {
		return fmt.Errorf("kubeapi: %w", err)
	}
	err = p.waitHTTP(ctx, s.httpClient(), s.Host()+"/readyz", func(code int, body []byte) bool {
		return code == http.StatusOK && string(body) == "ok"
	})
	if err != nil {
		p.stop(5 * time.Second)
		if addressInUse(p) {
			return fmt.Errorf("kubeapi: kube-apiserver: %w: %w", errAddressInUse, err)
		}
		return fmt.Errorf("kubeapi: start kube-apiserver: %w", err)
	}
	s.log.Info("kube-apiserver ready", "host", s.Host(), "dir", s.dir)
	return s.setProcess(&s.apiserver, p)
}

func (s *Server) apiServerArgs() []string {
	args := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.apiPort),
		"--tls-cert-file=" + s.pki.servingCertFile,
		"--tls-private-key-file=" + s.pki.servingKeyFile,
		"--client-ca-file=" + s.pki.caFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.pki.saKeyFile,
		"--service-account-signing-key-file=" + s.pki.saKeyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--profiling=false",
		// Writes to the kubernetes Service's endpoints would only be noise
		// with a single, short-lived apiserver.
		"--endpoint-reconciler-type=none",
		// Without it a SIGTERM leaves open watches to run until their own
		// timeout and the process lingers for the length of the HTTP
		// server's shutdown timeout; with it watches are ended at once.
		"--shutdown-watch-termination-grace-period=1s",
		"--v=1",
	}
	if s.opts.AuditPolicy != "" {
		args = append(args, "--audit-policy-file="+s.auditPolicyFile(), "--audit-log-path="+s.AuditLog(),
			"--audit-log-format=json", "--audit-log-mode=blocking")
	}
	return args
}

func (s *Server) auditPolicyFile() string { return filepath.Join(s.dir, "audit-policy.yaml") }

// AuditLog is where the API server writes its audit events when
// Options.AuditPolicy is set.
func (s *Server) AuditLog() string { return filepath.Join(s.dir, "audit.log") }

// httpClient authenticates as the admin and trusts only the test CA.
func (s *Server) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.pki.caCert)
	cert, err := tls.X509KeyPair(s.pki.adminCert, s.pki.adminKey)
	if err != nil {
		panic("kubeapi: our own admin key pair does not parse: " + err.Error())
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		}},
	}
}

// StartControllerManager starts kube-controller-manager (if it is not
// running) with Options.Controllers, as the admin, without leader election.
func (s *Server) StartControllerManager(ctx context.Context) error {
	s.mu.Lock()
	running := s.kcm != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	controllers := s.opts.Controllers
	if controllers == nil {
		controllers = DefaultControllers
	}
	ports, err := freePorts(1)
	if err != nil {
		return fmt.Errorf("kubeapi: kube-controller-manager: %w", err)
	}
	bin := filepath.Join(filepath.Dir(s.apiBin), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kubeapi: kube-controller-manager: %w (hack/test-apiserver.sh builds it)", err)
	}
	p, err := startProcess("kube-controller-manager", filepath.Join(s.dir, "kube-controller-manager.log"), bin,
		"--kubeconfig="+s.kubeconfig,
		"--authentication-kubeconfig="+s.kubeconfig,
		"--authorization-kubeconfig="+s.kubeconfig,
		// No front proxy here: do not look for its CA (an error every few
		// seconds in the log otherwise).
		"--authentication-skip-lookup=true",
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[0]),
		"--v=1")
	if err != nil {
		return fmt.Errorf("kubeapi: %w", err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
	err = p.waitHTTP(ctx, insecureClient(), url, func(code int, _ []byte) bool { return code == http.StatusOK })
	if err != nil {
		p.stop(5 * time.Second)
		return fmt.Errorf("kubeapi: start kube-controller-manager: %w", err)
	}
	return s.setProcess(&s.kcm, p)
}
