package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// loadBalancers is pier's LoadBalancer custom resource.
var loadBalancers = schema.GroupVersionResource{Group: "pier.dev", Version: "v1alpha1", Resource: "loadbalancers"}

// pierProcess is one `pier controller` or `pier agent`.
type pierProcess struct {
	*process
	args     []string
	apiAddr  string
	stateDir string // agents only
}

// Log is where a pier process's output goes ("controller" or "agent-<node>").
func (c *KubeCluster) Log(name string) string { return filepath.Join(c.logs, name+".log") }

// PierArgs are the command lines Start runs, one per process.
func (c *KubeCluster) PierArgs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.procs {
		out = append(out, strings.Join(p.args, " "))
	}
	return out
}

func (c *KubeCluster) startController() error {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	args := []string{c.cfg.PierBin, "controller",
		"--kubeconfig", c.cfg.ControllerKubeconfig,
		"--internal-pool", c.cfg.InternalPool,
		"--lease-namespace", c.cfg.LeaseNamespace,
		"--api-addr", addr,
		"--allow-loopback-endpoints", // the echo pods listen on 127.0.0.1
	}
	if c.cfg.NodeSelector != "" {
		args = append(args, "--node-selector", c.cfg.NodeSelector)
	}
	return c.startPier("controller", args, addr, "")
}

func (c *KubeCluster) startAgent(node string) error {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	// Short: HAProxy's sockets live under it (see ShortTempDir).
	state := filepath.Join(c.cfg.Dir, "s-"+node)
	args := []string{c.cfg.PierBin, "agent",
		"--node", node,
		"--kubeconfig", c.cfg.AgentKubeconfig,
		"--state-dir", state,
		"--api-addr", addr,
	}
	return c.startPier("agent-"+node, args, addr, state)
}

func (c *KubeCluster) startPier(name string, args []string, apiAddr, stateDir string) error {
	p, err := startProcess("pier "+name, args, nil, c.Log(name))
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs = append(c.procs, &pierProcess{process: p, args: args, apiAddr: apiAddr, stateDir: stateDir})
	c.mu.Unlock()
	return nil
}

// waitHealthy waits until every pier process answers GET /healthz.
func (c *KubeCluster) waitHealthy(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	c.mu.Lock()
	procs := append([]*pierProcess(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		err := poll(ctx, 200*time.Millisecond, c.cfg.StartTimeout, func() (bool, error) {
			if err := c.pierAlive(); err != nil {
				return false, err
			}
			_, err := get(ctx, hc, "http://"+p.apiAddr+"/healthz")
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("%s: no healthy /healthz on %s: %w\n%s", p.name, p.apiAddr, err, p.logTail(40))
		}
	}
	return nil
}

// pierAlive fails once any pier process has exited, with its log's end.
func (c *KubeCluster) pierAlive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.procs) == 0 {
		return errors.New("pier is not started")
	}
	for _, p := range c.procs {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited (%v); log %s:\n%s", p.name, err, p.logPath, p.logTail(40))
		}
	}
	return nil
}

// drain waits for the scenario namespaces, then the LoadBalancers, then
// the agents' HAProxy processes to be gone.
func (c *KubeCluster) drain(ctx context.Context) error {
	deadline := time.Now().Add(c.cfg.DrainTimeout)
	left := func() time.Duration { return max(time.Until(deadline), time.Second) }
	var names []string
	err := poll(ctx, time.Second, left(), func() (bool, error) {
		names = nil
		list, err := c.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=ingress-conformance",
		})
		if err != nil {
			return false, nil
		}
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		return len(names) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("namespaces not deleted: %v: %w", names, err)
	}
	err = poll(ctx, time.Second, left(), func() (bool, error) {
		names = nil
		list, err := c.dynamic.Resource(loadBalancers).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, lb := range list.Items {
			names = append(names, lb.GetName())
		}
		return len(names) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("LoadBalancers left after their Ingresses were deleted: %v: %w", names, err)
	}
	err = poll(ctx, time.Second, left(), func() (bool, error) {
		names = c.runningHAProxy()
		return len(names) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("HAProxy still running after its LoadBalancer was deleted: %v: %w", names, err)
	}
	return nil
}

// runningHAProxy lists the agents' HAProxy masters that still run, by
// their pid files ("<state>/haproxy/<uuid>/haproxy.pid").
func (c *KubeCluster) runningHAProxy() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.procs {
		if p.stateDir == "" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(p.stateDir, "haproxy", "*", "haproxy.pid"))
		for _, f := range files {
			if filepath.Base(filepath.Dir(f)) == "landing" {
				continue // the node's landing process runs as long as its agent, not per load balancer
			}
			data, err := os.ReadFile(f)
			pid, perr := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil || perr != nil {
				continue
			}
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
				out = append(out, fmt.Sprintf("%s (pid %d)", filepath.Base(filepath.Dir(f)), pid))
			}
		}
	}
	return out
}

// stopPier stops the controller first (it must not write while the
// agents go), then the agents.
func (c *KubeCluster) stopPier() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		p.stop(c.cfg.StopGrace)
	}
}

// freeLoopbackAddr is 127.0.0.1 with a port that was free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
