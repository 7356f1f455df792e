package bgp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The speakers run in node namespaces: a BGP session's socket belongs to
// the namespace of the thread that opened it, so each runs in a process
// of its own started with `ip netns exec` (this test binary, re-run as a
// helper). The router is bird2 in a namespace of its own; nothing has a
// route out.

const (
	routerNS = "pbgp-r"
	vip      = "10.99.5.1"
	vip6     = "fd00:99::5:1"
)

// nodeNS, the router's address towards it and the node's own.
var nodes = []struct{ ns, router, self, dev string }{
	{"pbgp-0", "10.98.1.1", "10.98.1.2", "r0"},
	{"pbgp-1", "10.98.2.1", "10.98.2.2", "r1"},
}

// helperConfig is what the helper process is told.
type helperConfig struct {
	ASN, PeerASN uint32
	Self, Peer   string
	Password     string
	MaxPrefixes  int
	// Log, when set, is where the speaker logs at Debug.
	Log string
	// HoldTime and BFD go to the speaker's Config as they are.
	HoldTime time.Duration
	BFD      BFD
}

// helperState answers the helper's "state" command.
type helperState struct {
	Established bool
	Received    uint64
	Learned     int
	BFD         string
}

func TestMain(m *testing.M) {
	if os.Getenv("PIER_BGP_HELPER") != "" {
		os.Exit(runHelper())
	}
	os.Exit(m.Run())
}

// runHelper runs one speaker; each line on stdin is the JSON list of the
// routes to advertise, answered with "ok" or the error.
func runHelper() int {
	var hc helperConfig
	if err := json.Unmarshal([]byte(os.Getenv("PIER_BGP_HELPER")), &hc); err != nil {
		fmt.Println(err)
		return 2
	}
	self := netip.MustParseAddr(hc.Self)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if hc.Log != "" {
		f, err := os.Create(hc.Log)
		if err != nil {
			fmt.Println(err)
			return 2
		}
		defer f.Close()
		logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := Config{ASN: hc.ASN, RouterID: self, MaxPrefixes: hc.MaxPrefixes, HoldTime: hc.HoldTime, BFD: hc.BFD,
		Peers:  []Peer{{Address: netip.MustParseAddr(hc.Peer), ASN: hc.PeerASN, Password: Password(hc.Password)}},
		Logger: logger}
	// What an agent logs of its configuration at start, as a careless
	// caller would.
	logger.Info("speaker config", "config", cfg, "peer", cfg.Peers[0], "text", fmt.Sprintf("%+v %#v", cfg, cfg.Peers[0]))
	s, err := Start(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "stop-bfd" {
			s.StopBFD()
			fmt.Println("ok")
			continue
		}
		if in.Text() == "state" {
			var st helperState
			peers, err := s.Peers(context.Background())
			if err == nil && len(peers) == 1 {
				st.Established, st.Received, st.BFD = peers[0].Established, peers[0].Received, peers[0].BFD
				st.Learned, err = s.Learned(context.Background())
			}
			if err != nil {
				fmt.Println(err)
				continue
			}
			b, _ := json.Marshal(st)
			fmt.Println(string(b))
			continue
		}
		var routes []Route
		err := json.Unmarshal(in.Bytes(), &routes)
		if err == nil {
			err = s.Advertise(context.Background(), routes)
		}
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println("ok")
	}
	s.Stop(context.Background())
	return 0
}

// speaker is a helper process.
type speaker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func (s *speaker) advertise(t *testing.T, routes ...Route) {
	t.Helper()
	b, _ := json.Marshal(routes)
	if _, err := fmt.Fprintf(s.in, "%s\n", b); err != nil {
		t.Fatal(err)
	}
	if !s.out.Scan() || s.out.Text() != "ok" {
		t.Fatalf("advertise %s: %q", b, s.out.Text())
	}
}

// state asks the speaker for its session and what it took from the router.
func (s *speaker) state(t *testing.T) helperState {
	t.Helper()
	if _, err := fmt.Fprintln(s.in, "state"); err != nil {
		t.Fatal(err)
	}
	var st helperState
	if !s.out.Scan() || json.Unmarshal(s.out.Bytes(), &st) != nil {
		t.Fatalf("state: %q", s.out.Text())
	}
	return st
}

func (s *speaker) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// worldOptions shape the router.
type worldOptions struct {
	// ibgp picks the router's ASN (65000 as the nodes', or 64999).
	ibgp bool
	// passwords are the TCP-MD5 passwords of the sessions with node 0
	// and node 1 ("": none).
	passwords [2]string
	// exports are prefixes the router sends every node.
	exports []string
}

// world builds the namespaces and starts bird with a session per node.
func world(t *testing.T, opts worldOptions) (routerASN uint32, birdc func(args ...string) string) {
	t.Helper()
	if os.Geteuid() != 0 {
		needed(t, "root")
	}
	for _, tool := range []string{"ip", "bird", "birdc"} {
		if _, err := exec.LookPath(tool); err != nil {
			needed(t, tool+" (apt-get install bird2 iproute2)")
		}
	}
	cleanup := func() {
		for _, ns := range []string{routerNS, nodes[0].ns, nodes[1].ns} {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	run(t, "ip", "netns", "add", routerNS)
	run(t, "ip", "-n", routerNS, "link", "set", "lo", "up")
	for _, n := range nodes {
		run(t, "ip", "netns", "add", n.ns)
		run(t, "ip", "-n", n.ns, "link", "set", "lo", "up")
		run(t, "ip", "-n", routerNS, "link", "add", n.dev, "type", "veth", "peer", "name", "eth0", "netns", n.ns)
		run(t, "ip", "-n", routerNS, "addr", "add", n.router+"/24", "dev", n.dev)
		run(t, "ip", "-n", routerNS, "link", "set", n.dev, "up")
		run(t, "ip", "-n", n.ns, "addr", "add", n.self+"/24", "dev", "eth0")
		run(t, "ip", "-n", n.ns, "link", "set", "eth0", "up")
	}
	routerASN = 65000
	if !opts.ibgp {
		routerASN = 64999
	}
	dir := t.TempDir()
	conf := fmt.Sprintf("router id %s;\nprotocol device {}\n", nodes[0].router)
	export := "none"
	if len(opts.exports) > 0 {
		conf += "protocol static {\n  ipv4;\n"
		for _, p := range opts.exports {
			conf += fmt.Sprintf("  route %s blackhole;\n", p)
		}
		conf += "}\n"
		export = "where source = RTS_STATIC"
	}
	for i, n := range nodes {
		password := ""
		if pw := opts.passwords[i]; pw != "" {
			password = fmt.Sprintf("  password %q;\n", pw)
		}
		conf += fmt.Sprintf("protocol bgp n%d {\n  local %s as %d;\n  neighbor %s as 65000;\n  direct;\n  passive on;\n%s"+
			"  hold time 9;\n  graceful restart on;\n  ipv4 { import all; export %s; gateway direct; };\n  ipv6 { import all; export none; };\n}\n",
			i, n.router, routerASN, n.self, password, export)
	}
	confPath, sock := filepath.Join(dir, "bird.conf"), filepath.Join(dir, "bird.ctl")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	bird := exec.Command("ip", "netns", "exec", routerNS, "bird", "-f", "-c", confPath, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
	bird.Stderr = os.Stderr
	if err := bird.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bird.Process.Kill(); _ = bird.Wait() })
	birdc = func(args ...string) string {
		out, _ := exec.Command("birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
		return string(out)
	}
	waitFor(t, 5*time.Second, "bird to answer", func() bool { return strings.Contains(birdc("show", "status"), "Daemon is up") })
	return routerASN, birdc
}

func needed(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("needs %s", what)
	}
	t.Skipf("needs %s", what)
}

// startSpeaker starts node i's speaker process.
func startSpeaker(t *testing.T, i int, routerASN uint32) *speaker {
	t.Helper()
	return startSpeakerWith(t, i, helperConfig{PeerASN: routerASN})
}

// startSpeakerWith starts node i's speaker process with hc (its ASN and
// addresses filled in).
func startSpeakerWith(t *testing.T, i int, hc helperConfig) *speaker {
	t.Helper()
	n := nodes[i]
	hc.ASN, hc.Self, hc.Peer = 65000, n.self, n.router
	env, _ := json.Marshal(hc)
	cmd := exec.Command("ip", "netns", "exec", n.ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PIER_BGP_HELPER="+string(env))
	cmd.Stderr = io.Discard
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &speaker{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(s.kill)
	return s
}

var viaRE = regexp.MustCompile(`via (\S+)`)

// primary returns the next hop the router uses for addr ("" none) and
// how many routes it has for it.
func primary(birdc func(...string) string, addr string) (string, int) {
	out := birdc("show", "route", "for", addr, "all")
	routes := strings.Count(out, "unicast [")
	m := viaRE.FindStringSubmatch(birdc("show", "route", "for", addr, "primary"))
	if m == nil {
		return "", routes
	}
	return m[1], routes
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, limit)
	return 0
}

// The seeds' case and the eBGP one: both nodes advertise, the router
// prefers the active node; a withdrawal or a dead speaker moves it to the
// standby within 100 ms.
func TestSpeakerWithBird(t *testing.T) {
	for _, ibgp := range []bool{true, false} {
		name := map[bool]string{true: "iBGP local-pref", false: "eBGP MED and prepend"}[ibgp]
		t.Run(name, func(t *testing.T) {
			routerASN, birdc := world(t, worldOptions{ibgp: ibgp})
			active, standby := startSpeaker(t, 0, routerASN), startSpeaker(t, 1, routerASN)
			a, s := netip.MustParseAddr(vip), netip.MustParseAddr(vip6)
			active.advertise(t, Route{Addr: a, Active: true}, Route{Addr: s, Active: true})
			standby.advertise(t, Route{Addr: a}, Route{Addr: s})
			took := waitFor(t, 20*time.Second, "both paths at the router, the active preferred", func() bool {
				via, n := primary(birdc, vip)
				return n == 2 && via == nodes[0].self
			})
			t.Logf("%s: sessions up and both paths in %s; %s", name, took.Round(time.Millisecond),
				strings.TrimSpace(birdc("show", "route", "for", vip, "all")))

			// The active node's HAProxy dies: it withdraws.
			start := time.Now()
			active.advertise(t, Route{Addr: s, Active: true})
			moved := waitFor(t, 2*time.Second, "the router to prefer the standby", func() bool {
				via, _ := primary(birdc, vip)
				return via == nodes[1].self
			})
			t.Logf("%s: withdrawal to the router's switch: %s (call included: %s)", name, moved.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			if moved > 100*time.Millisecond {
				t.Errorf("the router moved %s after the withdrawal, target 100ms", moved)
			}
			// Back as standby: the other node stays preferred.
			active.advertise(t, Route{Addr: a}, Route{Addr: s, Active: true})
			standby.advertise(t, Route{Addr: a, Active: true}, Route{Addr: s})
			waitFor(t, 2*time.Second, "roles swapped at the router", func() bool {
				via, n := primary(birdc, vip)
				return n == 2 && via == nodes[1].self
			})
			// The preferred node's agent restarts (its speaker killed):
			// graceful restart keeps its routes while it is away, and the
			// new speaker takes them over.
			standby.kill()
			time.Sleep(time.Second)
			if via, n := primary(birdc, vip); n != 2 || via != nodes[1].self {
				t.Fatalf("1 s into a restart the router has %d paths, via %s; want both kept, via %s:\n%s",
					n, via, nodes[1].self, birdc("show", "route", "for", vip, "all"))
			}
			standby = startSpeaker(t, 1, routerASN)
			standby.advertise(t, Route{Addr: a, Active: true})
			waitFor(t, 20*time.Second, "the restarted speaker's session, its graceful restart done", func() bool {
				return strings.Count(birdc("show", "protocols"), "Established") == 2 &&
					!strings.Contains(birdc("show", "protocols", "all", "n1"), "Neighbor graceful restart active")
			})
			// A speaker that does not come back: its routes go after the
			// restart time.
			standby.kill()
			lost := waitFor(t, 10*time.Second, "the router to drop the dead speaker's paths", func() bool {
				via, n := primary(birdc, vip)
				return n == 1 && via == nodes[0].self
			})
			t.Logf("%s: speaker gone for good, router back on the other node after %s (restart time 5 s)", name, lost.Round(time.Millisecond))
			if lost < 3*time.Second {
				t.Errorf("the routes went after %s, before the restart time", lost)
			}
		})
	}
}
