//go:build linux

package render

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/topo"
)

// The test binary doubles as the echo backend on the node and as the
// client's one-shot HTTP client: a process serves or dials from the
// network namespace it was started in.
const (
	helperServe = "PIER_RENDER_HELPER_SERVE" // serve echoBody on this address
	helperGet   = "PIER_RENDER_HELPER_GET"   // GET this URL once, exit 0 on echoBody
	echoBody    = "pier-echo"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(helperServe); addr != "" {
		os.Exit(serveEcho(addr))
	}
	if url := os.Getenv(helperGet); url != "" {
		os.Exit(getEcho(url))
	}
	os.Exit(m.Run())
}

func serveEcho(addr string) int {
	err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, echoBody)
	}))
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func getEcho(url string) int {
	c := &http.Client{Timeout: 400 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != echoBody {
		fmt.Fprintf(os.Stderr, "status %d, body %.64q\n", resp.StatusCode, body)
		return 1
	}
	return 0
}

var (
	foreignVIP  = netip.MustParseAddr("10.99.1.10")
	foreignPort = 8080
	echoAddr    = "127.0.0.1:18080" // on the node's loopback
)

// TestForeignBind is the standby of a pair: HAProxy starts from the
// rendered configuration on a node that does not hold the VIP, and serves
// it as soon as the address arrives on eth0 and stops when it leaves,
// with no reload (same master, same worker). Without "transparent" on
// the bind, the same HAProxy does not start at all.
func TestForeignBind(t *testing.T) {
	topo.Skip(t, "haproxy", "setpriv")
	top := topo.New(t, topo.Options{Nodes: 1, Client: true})
	node, client := top.Nodes[0], top.Client
	mustRun(t, "ip", "-n", client.NS, "route", "add", foreignVIP.String()+"/32", "dev", "eth0")
	// The client asks ARP again every 100 ms instead of every second;
	// in a pair, keepalived's gratuitous ARP tells it at once.
	mustRun(t, "ip", "netns", "exec", client.NS, "sysctl", "-q", "-w", "net.ipv4.neigh.eth0.retrans_time_ms=100")
	startHelper(t, node, helperServe, echoAddr)

	dir := t.TempDir()
	cfg := foreignConfig(t, dir)
	if !bytes.Contains(cfg, []byte(" transparent\n")) {
		t.Fatalf("no transparent bind in\n%s", cfg)
	}

	t.Run("plain bind does not start", func(t *testing.T) {
		plain := filepath.Join(dir, "plain.conf")
		writeFile(t, plain, bytes.ReplaceAll(cfg, []byte(" transparent\n"), []byte("\n")))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		out, err := node.Command(ctx, "haproxy", "-W", "-f", plain).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Cannot assign requested address") {
			t.Fatalf("haproxy with a plain bind: %v\n%s", err, out)
		}
	})
	path := filepath.Join(dir, "haproxy.conf")
	writeFile(t, path, cfg)
	// As root HAProxy sets IP_TRANSPARENT; without CAP_NET_ADMIN (pier
	// run as a user, an unprivileged agent) it falls back to IP_FREEBIND.
	t.Run("IP_TRANSPARENT", func(t *testing.T) {
		followVIP(t, node, client, dir, "haproxy", "-W", "-f", path)
	})
	t.Run("IP_FREEBIND", func(t *testing.T) {
		followVIP(t, node, client, dir, "setpriv", "--bounding-set", "-net_admin,-net_raw",
			"haproxy", "-W", "-f", path)
	})
}

// foreignConfig renders a load balancer on the VIP (no FIP) whose one
// pool is the echo helper on the node's loopback.
func foreignConfig(t *testing.T, dir string) []byte {
	t.Helper()
	host, port, _ := net.SplitHostPort(echoAddr)
	n, _ := strconv.Atoi(port)
	p := pool("echo", member(host, n))
	p.HealthCheck = false
	lb := newLB([]model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: foreignPort, DefaultPoolID: p.ID}}, p)
	lb.VIP, lb.FIP = foreignVIP.String(), ""
	cfg, err := Config(lb, Options{Dir: dir, MinSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// followVIP starts HAProxy on node with name and args and moves the VIP
// onto the node and off again under it.
func followVIP(t *testing.T, node, client *topo.Host, dir, name string, args ...string) {
	url := "http://" + net.JoinHostPort(foreignVIP.String(), strconv.Itoa(foreignPort)) + "/"
	exited := startForeign(t, node, name, args...)
	worker := workerPid(t, filepath.Join(dir, "haproxy.sock"), exited)
	if node.Has(foreignVIP) {
		t.Fatal("the node holds the VIP before the test gives it")
	}
	if reach(client, url) {
		t.Fatal("the VIP answered while nobody held it")
	}

	vip := foreignVIP.String() + "/32"
	mustRun(t, "ip", "-n", node.NS, "addr", "add", vip, "dev", "eth0")
	t.Cleanup(func() { _ = exec.Command("ip", "-n", node.NS, "addr", "del", vip, "dev", "eth0").Run() })
	start := time.Now()
	for !reach(client, url) {
		if time.Since(start) > time.Second {
			t.Fatal("the VIP did not answer within 1s of arriving on eth0")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("served %s after the address arrived", time.Since(start).Round(time.Millisecond))
	sameProcesses(t, dir, worker, exited)

	mustRun(t, "ip", "-n", node.NS, "addr", "del", vip, "dev", "eth0")
	if reach(client, url) {
		t.Fatal("the VIP still answered after it left the node")
	}
	sameProcesses(t, dir, worker, exited)
}

// startForeign runs HAProxy in node's namespace until the test ends, then
// stops its master with SIGTERM. The returned channel closes if it exits.
func startForeign(t *testing.T, node *topo.Host, name string, args ...string) <-chan struct{} {
	t.Helper()
	var out bytes.Buffer
	cmd := node.Command(context.Background(), name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("haproxy output:\n%s", out.String())
		}
	})
	return exited
}

// workerPid waits for the worker to answer on the stats socket and
// returns its pid: a reload would start another worker.
func workerPid(t *testing.T, socket string, exited <-chan struct{}) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatal("haproxy exited on a node that does not hold its VIP")
		default:
		}
		if pid, err := showInfoPid(socket); err == nil {
			return pid
		} else if time.Now().After(deadline) {
			t.Fatalf("haproxy did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func showInfoPid(socket string) (int, error) {
	conn, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "show info\n"); err != nil {
		return 0, err
	}
	info, err := io.ReadAll(conn)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(info)) {
		if v, ok := strings.CutPrefix(line, "Pid: "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no Pid in show info: %.200q", info)
}

func sameProcesses(t *testing.T, dir string, worker int, exited <-chan struct{}) {
	t.Helper()
	select {
	case <-exited:
		t.Fatal("the haproxy master exited")
	default:
	}
	pid, err := showInfoPid(filepath.Join(dir, "haproxy.sock"))
	if err != nil || pid != worker {
		t.Fatalf("worker pid %d (%v), was %d: haproxy reloaded", pid, err, worker)
	}
}

// reach reports whether one request from client through url reaches the
// echo backend (the helper gives up after 400 ms).
func reach(client *topo.Host, url string) bool {
	cmd := client.Command(context.Background(), os.Args[0])
	cmd.Env = append(os.Environ(), helperGet+"="+url)
	return cmd.Run() == nil
}

// startHelper runs this test binary in host's namespace with env=value
// until the test ends (topo also kills what is left in its namespaces).
func startHelper(t *testing.T, host *topo.Host, env, value string) {
	t.Helper()
	cmd := host.Command(t.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
