package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// FilesConfig configures a FilesCluster.
type FilesConfig struct {
	// PierBin is the pier binary; it runs `pier run` and the echo pods.
	PierBin string
	// Dir is the working directory; it gets manifests/, staging/, state/
	// and logs/.
	Dir string
	// StartTimeout bounds the wait for pier's API to answer (default 60 s).
	StartTimeout time.Duration
	// PodReadyTimeout bounds the wait for an echo pod (default 20 s).
	PodReadyTimeout time.Duration
	// StopGrace is how long a process gets after SIGTERM before its
	// process group is killed (default 20 s).
	StopGrace time.Duration
}

// FilesCluster is the Cluster of `pier run`: objects are YAML files in the
// directory pier watches, pods are `pier echo` processes on 127.0.0.1, and
// the status comes from pier's API. Every Ingress gets its own loopback
// VIP, served on the HTTP and HTTPS ports chosen here.
type FilesCluster struct {
	cfg                 FilesConfig
	manifests, staging  string
	stateDir, logs      string
	httpPort, httpsPort int
	apiAddr             string
	api                 *http.Client

	mu         sync.Mutex
	pier       *process
	usedPorts  map[int]bool
	namespaces map[string]*filesNamespace
}

type filesNamespace struct {
	files    map[string]bool
	backends map[string]*filesBackend // by Service name
}

type filesBackend struct {
	ingress, service string
	port             networkingv1.ServiceBackendPort
	pods             []*echoPod
}

type echoPod struct {
	podEndpoint
	proc *process
}

var _ Cluster = (*FilesCluster)(nil)

// NewFilesCluster prepares the directories and ports; Start runs pier.
func NewFilesCluster(cfg FilesConfig) (*FilesCluster, error) {
	if cfg.PierBin == "" || cfg.Dir == "" {
		return nil, errors.New("files cluster: PierBin and Dir are required")
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.PodReadyTimeout == 0 {
		cfg.PodReadyTimeout = 20 * time.Second
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 20 * time.Second
	}
	c := &FilesCluster{
		cfg:        cfg,
		manifests:  filepath.Join(cfg.Dir, "manifests"),
		staging:    filepath.Join(cfg.Dir, "staging"),
		stateDir:   filepath.Join(cfg.Dir, "state"),
		logs:       filepath.Join(cfg.Dir, "logs"),
		api:        &http.Client{Timeout: 5 * time.Second},
		usedPorts:  map[int]bool{},
		namespaces: map[string]*filesNamespace{},
	}
	for _, d := range []string{c.manifests, c.staging, c.stateDir, c.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("files cluster: %w", err)
		}
	}
	var err error
	if c.httpPort, err = c.freePort(); err != nil {
		return nil, err
	}
	if c.httpsPort, err = c.freePort(); err != nil {
		return nil, err
	}
	apiPort, err := c.freePort()
	if err != nil {
		return nil, err
	}
	c.apiAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
	return c, nil
}

// PierArgs is the command line Start runs.
func (c *FilesCluster) PierArgs() []string {
	return []string{c.cfg.PierBin, "run",
		"-f", c.manifests,
		"--state-dir", c.stateDir,
		"--http-port", strconv.Itoa(c.httpPort),
		"--https-port", strconv.Itoa(c.httpsPort),
		"--api-addr", c.apiAddr,
	}
}

// PierLog is the file pier's output goes to.
func (c *FilesCluster) PierLog() string { return filepath.Join(c.logs, "pier.log") }

// Start writes the IngressClass, starts `pier run` and waits for its API.
func (c *FilesCluster) Start(ctx context.Context) error {
	class, err := ingressClassManifest()
	if err != nil {
		return err
	}
	if err := c.writeManifest("", "cluster.ingressclass."+IngressClass+".yaml", class); err != nil {
		return err
	}
	p, err := startProcess("pier run", c.PierArgs(), nil, c.PierLog())
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.pier = p
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	for {
		if err := c.pierAlive(); err != nil {
			return err
		}
		// Any HTTP answer, a 404 included, means the API is up.
		if _, _, err := c.getIngress(ctx, "pier-conformance", "probe"); err == nil {
			return nil
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			return fmt.Errorf("pier API on %s did not answer within %s; log %s:\n%s",
				c.apiAddr, c.cfg.StartTimeout, c.PierLog(), p.logTail(40))
		}
	}
}

// Close stops every pod and pier.
func (c *FilesCluster) Close() error {
	c.mu.Lock()
	var procs []*process
	for _, ns := range c.namespaces {
		for _, b := range ns.backends {
			for _, pod := range b.pods {
				procs = append(procs, pod.proc)
			}
		}
	}
	c.namespaces = map[string]*filesNamespace{}
	pier := c.pier
	c.mu.Unlock()

	stopAll(procs, c.cfg.StopGrace)
	if pier != nil {
		pier.stop(c.cfg.StopGrace)
	}
	return nil
}

// Ports implements Cluster.
func (c *FilesCluster) Ports() (int, int) { return c.httpPort, c.httpsPort }

// NewNamespace implements Cluster; the name looks like one upstream's
// GenerateName "ingress-conformance-" would get.
func (c *FilesCluster) NewNamespace(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		ns := "ingress-conformance-" + randomSuffix(5)
		if _, taken := c.namespaces[ns]; !taken {
			c.namespaces[ns] = &filesNamespace{files: map[string]bool{}, backends: map[string]*filesBackend{}}
			return ns, nil
		}
	}
}

// DeleteNamespace implements Cluster: the Ingresses go first, then the
// other objects, then the pods.
func (c *FilesCluster) DeleteNamespace(_ context.Context, ns string) error {
	c.mu.Lock()
	n, ok := c.namespaces[ns]
	delete(c.namespaces, ns)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	var errs []error
	for _, ingressFirst := range []bool{true, false} {
		for name := range n.files {
			if strings.HasPrefix(name, ns+".ingress.") == ingressFirst {
				if err := os.Remove(filepath.Join(c.manifests, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	var procs []*process
	for _, b := range n.backends {
		for _, pod := range b.pods {
			procs = append(procs, pod.proc)
		}
	}
	stopAll(procs, c.cfg.StopGrace)
	return errors.Join(errs...)
}

// CreateBackend implements Cluster. A backend that exists is kept as it is,
// as upstream keeps an existing Deployment.
func (c *FilesCluster) CreateBackend(ctx context.Context, ns, ingressName, serviceName string, port networkingv1.ServiceBackendPort, replicas int) error {
	if err := checkNames(serviceName, deploymentName(ingressName, serviceName)); err != nil {
		return err
	}
	n, err := c.namespace(ns)
	if err != nil {
		return err
	}
	c.mu.Lock()
	_, exists := n.backends[serviceName]
	c.mu.Unlock()
	if exists {
		return nil
	}
	b := &filesBackend{ingress: ingressName, service: serviceName, port: port}
	if err := c.scale(ctx, ns, b, replicas); err != nil {
		stopAll(podProcs(b.pods), c.cfg.StopGrace)
		return err
	}
	c.mu.Lock()
	n.backends[serviceName] = b
	c.mu.Unlock()
	return nil
}

// ScaleBackend implements Cluster.
func (c *FilesCluster) ScaleBackend(ctx context.Context, ns, ingressName, serviceName string, replicas int) error {
	n, err := c.namespace(ns)
	if err != nil {
		return err
	}
	c.mu.Lock()
	b, ok := n.backends[serviceName]
	c.mu.Unlock()
	if !ok || b.ingress != ingressName {
		return fmt.Errorf("no backend %s for ingress %s in namespace %s", serviceName, ingressName, ns)
	}
	return c.scale(ctx, ns, b, replicas)
}

// scale brings b to replicas ready pods and rewrites its manifest. New pods
// are listed once they answer; removed pods are unlisted before they stop.
func (c *FilesCluster) scale(ctx context.Context, ns string, b *filesBackend, replicas int) error {
	if replicas < 0 {
		return fmt.Errorf("negative replica count %d", replicas)
	}
	c.mu.Lock()
	var surplus []*echoPod
	if len(b.pods) > replicas {
		surplus = b.pods[replicas:]
		b.pods = b.pods[:replicas:replicas]
	}
	have := len(b.pods)
	c.mu.Unlock()
	for ; have < replicas; have++ {
		pod, err := c.startPod(ctx, ns, b)
		if err != nil {
			return err
		}
		c.mu.Lock()
		b.pods = append(b.pods, pod)
		c.mu.Unlock()
	}
	c.mu.Lock()
	eps := make([]podEndpoint, len(b.pods))
	for i, p := range b.pods {
		eps[i] = p.podEndpoint
	}
	c.mu.Unlock()
	data, err := backendManifest(ns, b.ingress, b.service, b.port, eps)
	if err != nil {
		return err
	}
	if err := c.writeManifest(ns, ns+".service."+b.service+".yaml", data); err != nil {
		return err
	}
	stopAll(podProcs(surplus), c.cfg.StopGrace)
	return nil
}

// CreateTLSSecret implements Cluster.
func (c *FilesCluster) CreateTLSSecret(_ context.Context, ns, name string, certPEM, keyPEM []byte) error {
	if err := checkNames(name); err != nil {
		return err
	}
	data, err := secretManifest(ns, name, certPEM, keyPEM)
	if err != nil {
		return err
	}
	return c.writeManifest(ns, ns+".secret."+name+".yaml", data)
}

// CreateIngress implements Cluster.
func (c *FilesCluster) CreateIngress(_ context.Context, ns string, ing *networkingv1.Ingress) error {
	if err := checkNames(ing.Name); err != nil {
		return err
	}
	data, err := ingressManifest(ns, ing)
	if err != nil {
		return err
	}
	return c.writeManifest(ns, ns+".ingress."+ing.Name+".yaml", data)
}

// IngressStatus implements Cluster with GET /ingresses/{ns}/{name} on pier's
// API; a 404 means pier does not know the Ingress (yet).
func (c *FilesCluster) IngressStatus(ctx context.Context, ns, name string) ([]networkingv1.IngressLoadBalancerIngress, error) {
	if err := c.pierAlive(); err != nil {
		return nil, err
	}
	ing, found, err := c.getIngress(ctx, ns, name)
	if err != nil || !found {
		return nil, err
	}
	return ing.Status.LoadBalancer.Ingress, nil
}

// getIngress reads one Ingress from pier's API; found is false on 404.
func (c *FilesCluster) getIngress(ctx context.Context, ns, name string) (ing *networkingv1.Ingress, found bool, err error) {
	u := "http://" + c.apiAddr + "/ingresses/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := c.api.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("pier API: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, false, fmt.Errorf("pier API: GET %s: %w", u, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("pier API: GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	ing = &networkingv1.Ingress{}
	if err := json.Unmarshal(body, ing); err != nil {
		return nil, false, fmt.Errorf("pier API: GET %s: decoding Ingress: %w", u, err)
	}
	return ing, true, nil
}

// pierAlive fails once pier has exited, with the end of its log.
func (c *FilesCluster) pierAlive() error {
	c.mu.Lock()
	p := c.pier
	c.mu.Unlock()
	if p == nil {
		return errors.New("pier is not started")
	}
	if done, err := p.exited(); done {
		return fmt.Errorf("pier run exited (%v); log %s:\n%s", err, c.PierLog(), p.logTail(40))
	}
	return nil
}

func (c *FilesCluster) namespace(ns string) (*filesNamespace, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.namespaces[ns]
	if !ok {
		return nil, fmt.Errorf("namespace %q was not created by this cluster", ns)
	}
	return n, nil
}

// writeManifest puts data into the watched directory atomically: written
// in staging/, then renamed, so pier never reads half a file.
func (c *FilesCluster) writeManifest(ns, name string, data []byte) error {
	var n *filesNamespace
	if ns != "" {
		var err error
		if n, err = c.namespace(ns); err != nil {
			return err
		}
	}
	tmp := filepath.Join(c.staging, name)
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing manifest %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(c.manifests, name)); err != nil {
		return fmt.Errorf("writing manifest %s: %w", name, err)
	}
	if n != nil {
		c.mu.Lock()
		n.files[name] = true
		c.mu.Unlock()
	}
	return nil
}
