package nativedriver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/netnsdo"
)

// world is the network of one test, all in namespaces named pnat-<pid>-*
// with only 10.98.0.0/16 addresses and no route out:
//
//	client c  eth0 10.98.1.2 ── c0 10.98.1.1   node n   lo 10.98.200.1/24 (VIPs)
//	                                                     lo 10.98.201.1/24 (FIPs)
//	pod p<i>  eth0 10.98.1<i>.2 ── p<i> 10.98.1<i>.1
//
// The client routes 10.98.0.0/16 to the node. The pods have no route
// beyond their own link: replies reach the client only because the node
// masquerades, which is what the driver promises.
type world struct {
	node, client string
	pods         []string
	servers      []*echoServer
}

const podPort = 8080

// needRoot skips without root or nft, and fails instead under CI.
func needRoot(t testing.TB) {
	t.Helper()
	missing := ""
	if os.Geteuid() != 0 {
		missing = "root"
	}
	for _, bin := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(bin); err != nil && missing == "" {
			missing = bin + " (hack/deps.sh installs nftables and iproute2)"
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the native driver test needs %s", missing)
	}
	t.Skipf("the native driver test needs %s; set CI=true to make this a failure", missing)
}

func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newWorld builds the network with pods echo servers and arranges for all
// of it to go when t ends, failed or not.
func newWorld(t testing.TB, pods int) *world {
	needRoot(t)
	removeStale()
	prefix := "pnat-" + strconv.Itoa(os.Getpid()%100000) + "-"
	w := &world{node: prefix + "n", client: prefix + "c"}
	for i := range pods {
		w.pods = append(w.pods, prefix+"p"+strconv.Itoa(i))
	}
	all := append([]string{w.node, w.client}, w.pods...)
	t.Cleanup(func() {
		for _, s := range w.servers {
			s.close()
		}
		for _, ns := range all {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	for _, ns := range all {
		ipCmd(t, "netns", "add", ns)
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
	ipCmd(t, "-n", w.node, "link", "add", "c0", "type", "veth", "peer", "name", "eth0", "netns", w.client)
	ipCmd(t, "-n", w.node, "addr", "add", "10.98.1.1/24", "dev", "c0")
	ipCmd(t, "-n", w.client, "addr", "add", "10.98.1.2/24", "dev", "eth0")
	ipCmd(t, "-n", w.node, "link", "set", "c0", "up")
	ipCmd(t, "-n", w.client, "link", "set", "eth0", "up")
	ipCmd(t, "-n", w.client, "route", "add", "10.98.0.0/16", "via", "10.98.1.1")
	ipCmd(t, "-n", w.node, "addr", "add", "10.98.200.1/24", "dev", "lo")
	ipCmd(t, "-n", w.node, "addr", "add", "10.98.201.1/24", "dev", "lo")
	if out, err := exec.Command("ip", "netns", "exec", w.node, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		t.Fatalf("ip_forward: %v\n%s", err, out)
	}
	for i, ns := range w.pods {
		link := "p" + strconv.Itoa(i)
		ipCmd(t, "-n", w.node, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
		ipCmd(t, "-n", w.node, "addr", "add", w.podAddr(i, 1)+"/24", "dev", link)
		ipCmd(t, "-n", ns, "addr", "add", w.podAddr(i, 2)+"/24", "dev", "eth0")
		ipCmd(t, "-n", w.node, "link", "set", link, "up")
		ipCmd(t, "-n", ns, "link", "set", "eth0", "up")
		s, err := startEcho(ns, "pod"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		w.servers = append(w.servers, s)
	}
	return w
}

// podAddr is host (1: the node's side, 2: the pod) of pod i's link.
func (w *world) podAddr(i, host int) string { return fmt.Sprintf("10.98.%d.%d", 10+i, host) }

// removeStale deletes namespaces of earlier runs whose test binary died
// before its cleanup.
func removeStale() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, " ")
		rest, ok := strings.CutPrefix(name, "pnat-")
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if n, err := strconv.Atoi(pid); err == nil && n != os.Getpid()%100000 && !alive(n) {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// echoServer answers on TCP and UDP port podPort in a pod's namespace:
// a TCP connection first gets the pod's name on a line, then its bytes
// echoed; a datagram gets the pod's name.
type echoServer struct {
	name string
	ln   net.Listener
	pc   net.PacketConn
	wg   sync.WaitGroup
	mu   sync.Mutex
	cs   []net.Conn
}

func startEcho(ns, name string) (*echoServer, error) {
	s := &echoServer{name: name}
	err := netnsdo.Do(ns, func() error {
		var err error
		if s.ln, err = net.Listen("tcp4", ":"+strconv.Itoa(podPort)); err != nil {
			return err
		}
		s.pc, err = net.ListenPacket("udp4", ":"+strconv.Itoa(podPort))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("echo in %s: %w", ns, err)
	}
	s.wg.Add(2)
	go s.serveTCP()
	go s.serveUDP()
	return s, nil
}

func (s *echoServer) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.cs = append(s.cs, c)
		s.mu.Unlock()
		go func() {
			defer c.Close()
			if _, err := io.WriteString(c, s.name+"\n"); err == nil {
				_, _ = io.Copy(c, c)
			}
		}()
	}
}

func (s *echoServer) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		_, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = s.pc.WriteTo([]byte(s.name), from)
	}
}

func (s *echoServer) close() {
	s.ln.Close()
	s.pc.Close()
	s.mu.Lock()
	for _, c := range s.cs {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// dial opens a TCP connection from the client and returns it with the
// name of the pod that answered.
func (w *world) dial(addr string) (net.Conn, string, error) {
	var c net.Conn
	err := netnsdo.Do(w.client, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, 2*time.Second)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		return nil, "", fmt.Errorf("read pod name: %w", err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, strings.TrimSpace(line), nil
}

// askUDP sends one datagram from the client and returns the pod's answer.
func (w *world) askUDP(addr string) (string, error) {
	var c net.Conn
	err := netnsdo.Do(w.client, func() error {
		var err error
		c, err = net.Dial("udp4", addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return ask(c)
}

// udpFlow opens a UDP socket from the client to addr and returns it with
// the pod that answered its first datagram.
func (w *world) udpFlow(t testing.TB, addr string) (net.Conn, string) {
	t.Helper()
	var c net.Conn
	if err := netnsdo.Do(w.client, func() error {
		var err error
		c, err = net.Dial("udp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pod, err := ask(c)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, pod
}

// ask sends one datagram on c and returns the answer.
func ask(c net.Conn) (string, error) {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("hi")); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// echoes checks that c still carries bytes both ways.
func echoes(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "ping"); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return errors.New("echoed " + string(buf))
	}
	return nil
}

// ruleset is `nft list ruleset` in the node's namespace.
func (w *world) ruleset(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", w.node, "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v\n%s", err, out)
	}
	return string(out)
}
