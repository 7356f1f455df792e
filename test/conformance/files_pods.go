package conformance

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// podAttempts is how often a pod is started on a new port when it dies at
// once: the free port may have been taken between finding and binding it.
const podAttempts = 3

// startPod starts one `pier echo` process for b and returns once it serves
// as the pod it was named (the readiness probe of the upstream Deployment
// is GET /health).
func (c *FilesCluster) startPod(ctx context.Context, ns string, b *filesBackend) (*echoPod, error) {
	name := c.podName(ns, b)
	var lastErr error
	for range podAttempts {
		port, err := c.freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		argv := []string{c.cfg.PierBin, "echo", "--listen", addr}
		env := []string{
			"NAMESPACE=" + ns,
			"INGRESS_NAME=" + b.ingress,
			"SERVICE_NAME=" + b.service,
			"POD_NAME=" + name,
		}
		proc, err := startProcess("pod "+ns+"/"+name, argv, env, filepath.Join(c.logs, ns+"."+name+".log"))
		if err != nil {
			return nil, err
		}
		lastErr = waitPodReady(ctx, proc, addr, name, c.cfg.PodReadyTimeout)
		if lastErr == nil {
			return &echoPod{podEndpoint: podEndpoint{Name: name, Address: "127.0.0.1", Port: int32(port)}, proc: proc}, nil
		}
		proc.stop(c.cfg.StopGrace)
		if done, _ := proc.exited(); !done || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("starting pod %s/%s: %w", ns, name, lastErr)
}

// podName is a name like a Deployment's pods get, unique in the namespace.
func (c *FilesCluster) podName(ns string, b *filesBackend) string {
	taken := map[string]bool{}
	c.mu.Lock()
	if n := c.namespaces[ns]; n != nil {
		for _, other := range n.backends {
			for _, p := range other.pods {
				taken[p.Name] = true
			}
		}
	}
	for _, p := range b.pods {
		taken[p.Name] = true
	}
	c.mu.Unlock()
	for {
		name := deploymentName(b.ingress, b.service) + "-" + randomSuffix(5)
		if !taken[name] {
			return name
		}
	}
}

// waitPodReady polls addr until /health answers 200 and an echo reports
// pod name (so a stranger that took the port cannot pass for the pod).
func waitPodReady(ctx context.Context, proc *process, addr, pod string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	var lastErr error
	for {
		if done, err := proc.exited(); done {
			return fmt.Errorf("pier echo on %s exited (%v):\n%s", addr, err, proc.logTail(20))
		}
		lastErr = probePod(ctx, hc, addr, pod)
		if lastErr == nil {
			return nil
		}
		if sleep(ctx, 50*time.Millisecond) != nil {
			return fmt.Errorf("pier echo on %s not ready within %s: %w", addr, timeout, lastErr)
		}
	}
}

func probePod(ctx context.Context, hc *http.Client, addr, pod string) error {
	if _, err := get(ctx, hc, "http://"+addr+"/health"); err != nil {
		return err
	}
	body, err := get(ctx, hc, "http://"+addr+"/")
	if err != nil {
		return err
	}
	var echo capturedRequest
	if err := json.Unmarshal(body, &echo); err != nil {
		return fmt.Errorf("echo answer is not JSON: %w", err)
	}
	if echo.Pod != pod {
		return fmt.Errorf("%s answers as pod %q, want %q", addr, echo.Pod, pod)
	}
	return nil
}

func get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("GET " + url + ": " + resp.Status)
	}
	return body, nil
}

// freePort returns a loopback TCP port that was free a moment ago and that
// this cluster has not handed out before.
func (c *FilesCluster) freePort() (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		c.mu.Lock()
		used := c.usedPorts[port]
		c.usedPorts[port] = true
		c.mu.Unlock()
		if !used {
			return port, nil
		}
	}
	return 0, errors.New("finding a free port: every port offered was already handed out")
}

// checkNames refuses names that are not DNS subdomains: they become file
// names here, and the API server would refuse them too.
func checkNames(names ...string) error {
	for _, n := range names {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return fmt.Errorf("invalid name %q: %s", n, strings.Join(errs, "; "))
		}
	}
	return nil
}

// randomSuffix is n characters from the alphabet Kubernetes uses for
// generated names.
func randomSuffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func podProcs(pods []*echoPod) []*process {
	procs := make([]*process, len(pods))
	for i, p := range pods {
		procs[i] = p.proc
	}
	return procs
}

// stopAll stops processes in parallel.
func stopAll(procs []*process, grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.stop(grace) })
	}
	wg.Wait()
}
