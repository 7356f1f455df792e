// Package kubeapi runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver (and, on request, kube-controller-manager) as child
// processes on loopback ports, built from the version pinned in hack/kube by
// hack/test-apiserver.sh. There is no kubelet and no scheduler: pods are
// created but never run.
//
// One server per test binary is the intended use:
//
//	func TestMain(m *testing.M) { kubeapi.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		srv := kubeapi.Shared(t) // started on first use, stopped by Main
//		client := dynamic.NewForConfigOrDie(srv.Config())
//		...
//	}
//
// A test that cannot get an API server fails; it never skips.
package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Options selects what Start runs besides etcd and kube-apiserver.
type Options struct {
	// ControllerManager also starts kube-controller-manager with the
	// controllers in Controllers (DefaultControllers when nil).
	ControllerManager bool
	Controllers       []string
	// Logger receives progress lines; nil means slog.Default().
	Logger *slog.Logger
	// AuditPolicy, when set, is an audit.k8s.io/v1 Policy (YAML): the
	// API server then writes every request it selects, one JSON line
	// each, to AuditLog(). A benchmark turns it on to see which writes
	// reached the server, in which order and with which resourceVersion.
	AuditPolicy string
}

// DefaultControllers are the kube-controller-manager controllers the
// conformance run needs. serviceaccount is among them because the default
// ServiceAccount admission plugin refuses pods in a namespace whose
// "default" ServiceAccount does not exist, and that controller creates it.
var DefaultControllers = []string{
	"deployment-controller", "replicaset-controller", "endpointslice-controller",
	"namespace-controller", "garbage-collector-controller", "serviceaccount-controller",
}

// startTimeout bounds a start of the whole control plane. kube-apiserver
// needs 5–30 s to become ready on a shared 2-core machine.
const startTimeout = 3 * time.Minute

// Server is one running control plane. Its methods are safe for concurrent
// use.
type Server struct {
	opts       Options
	log        *slog.Logger
	dir        string
	pki        *pki
	kubeconfig string
	apiBin     string
	apiPort    int
	etcdURL    string

	mu        sync.Mutex
	etcd      *process
	apiserver *process
	kcm       *process
}

// Start builds the binaries if needed (hack/test-apiserver.sh), then starts
// etcd and kube-apiserver and waits for /readyz.
func Start(ctx context.Context, opts Options) (*Server, error) {
	s := &Server{opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	var err error
	// No timeout for the build: a cold one takes many minutes.
	if s.apiBin, err = binary(ctx, s.log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	base := tempBase()
	removeStale(base)
	if s.dir, err = os.MkdirTemp(base, "pier-kubeapi-"); err != nil {
		return nil, fmt.Errorf("kubeapi: temp dir: %w", err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(s.dir, "owner.pid"), pid, 0o600); err != nil {
		s.Stop()
		return nil, fmt.Errorf("kubeapi: %w", err)
	}
	if err := s.start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	var err error
	if s.pki, err = newPKI(s.dir); err != nil {
		return fmt.Errorf("kubeapi: %w", err)
	}
	if err := s.startEtcd(ctx); err != nil {
		return err
	}
	if err := s.startAPIServer(ctx); err != nil {
		return err
	}
	if s.opts.ControllerManager {
		return s.StartControllerManager(ctx)
	}
	return nil
}

// tempBase prefers tmpfs: etcd fsyncs every write, and on a shared disk
// that dominates test time.
func tempBase() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "pier-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// Config returns a fresh admin (system:masters) client configuration. Client
// rate limiting is off: client-go's default 5 QPS would make tests measure
// the limiter.
func (s *Server) Config() *rest.Config {
	return &rest.Config{
		Host: s.Host(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData: s.pki.caCert, CertData: s.pki.adminCert, KeyData: s.pki.adminKey,
		},
		QPS:   -1,
		Burst: -1,
	}
}

// Host is the API server's URL.
func (s *Server) Host() string { return fmt.Sprintf("https://127.0.0.1:%d", s.apiPort) }

// Kubeconfig is the path of an admin kubeconfig file (for kubectl and for
// processes under test).
func (s *Server) Kubeconfig() string { return s.kubeconfig }

// Dir holds the server's logs (etcd.log, kube-apiserver.log, ...).
func (s *Server) Dir() string { return s.dir }

// Stop ends every process and removes the server's folder. It is safe to
// call more than once.
func (s *Server) Stop() {
	s.stopProcesses()
	if s.dir != "" && os.Getenv("PIER_KUBEAPI_KEEP") == "" {
		os.RemoveAll(s.dir)
	}
}

func (s *Server) stopProcesses() {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Reverse start order: clients before the apiserver before its storage.
	s.kcm.stop(10 * time.Second)
	s.apiserver.stop(15 * time.Second)
	s.etcd.stop(10 * time.Second)
	s.kcm, s.apiserver, s.etcd = nil, nil, nil
}

// saveLogs copies the components' logs to a new folder under os.TempDir
// (not tmpfs: they should outlive the run) and returns its path.
func (s *Server) saveLogs() (string, error) {
	logs, err := filepath.Glob(filepath.Join(s.dir, "*.log"))
	if err != nil {
		return "", err
	}
	dst, err := os.MkdirTemp("", "pier-kubeapi-logs-")
	if err != nil {
		return "", err
	}
	for _, src := range logs {
		data, err := os.ReadFile(src)
		if err != nil {
			return dst, err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(src)), data, 0o600); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// port with the same etcd and keys, so clients reconnect to a server whose
// watch cache starts empty: watches from an older resourceVersion expire.
func (s *Server) RestartAPIServer(ctx context.Context) error {
	s.mu.Lock()
	old := s.apiserver
	s.apiserver = nil
	s.mu.Unlock()
	if old == nil {
		return errNotStarted
	}
	old.stop(15 * time.Second)
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return s.runAPIServer(ctx)
}

// StopAPIServer stops kube-apiserver alone (etcd keeps running); pair it with
// StartAPIServer to hold the API down for a while.
func (s *Server) StopAPIServer() {
	s.mu.Lock()
	old := s.apiserver
	s.apiserver = nil
	s.mu.Unlock()
	old.stop(15 * time.Second)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer.
func (s *Server) StartAPIServer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return s.runAPIServer(ctx)
}

func (s *Server) setProcess(slot **process, p *process) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *slot != nil {
		p.stop(time.Second)
		return errors.New("kubeapi: process already running")
	}
	*slot = p
	return nil
}

// binary returns the kube-apiserver path: $PIER_KUBE_APISERVER, or what
// hack/test-apiserver.sh prints (it builds on a cold cache, then answers in
// about a second).
func binary(ctx context.Context, log *slog.Logger) (string, error) {
	if p := os.Getenv("PIER_KUBE_APISERVER"); p != "" {
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return runBuildScript(ctx, log, filepath.Join(root, "hack", "test-apiserver.sh"))
}
