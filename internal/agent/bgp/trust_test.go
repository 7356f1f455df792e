package bgp

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What a session trusts of the router, against bird: TCP-MD5 signs the
// session (a wrong password never comes up), every route the router sends
// is rejected (none reaches the speaker's RIB, while the speaker's own
// route still reaches the router), and a router that sends more than
// MaxPrefixes has its session ended.
func TestSpeakerSessionTrustWithBird(t *testing.T) {
	exports := []string{"10.200.0.0/24", "10.200.1.0/24", "0.0.0.0/0"}
	routerASN, birdc := world(t, worldOptions{ibgp: true, passwords: [2]string{"right horse battery", "right horse battery"},
		exports: exports})
	dir := t.TempDir()
	logPath := filepath.Join(dir, "n0.log")
	signed := startSpeakerWith(t, 0, helperConfig{PeerASN: routerASN, Password: "right horse battery", Log: logPath})
	wrong := startSpeakerWith(t, 1, helperConfig{PeerASN: routerASN, Password: "wrong staple"})
	signed.advertise(t, Route{Addr: netip.MustParseAddr(vip), Active: true})
	wrong.advertise(t, Route{Addr: netip.MustParseAddr(vip)})

	took := waitFor(t, 20*time.Second, "the signed session up, its route at the router", func() bool {
		via, _ := primary(birdc, vip)
		return via == nodes[0].self
	})
	t.Logf("matching password: session up and the route at the router in %s", took.Round(time.Millisecond))
	waitFor(t, 10*time.Second, "the router's routes to reach the speaker", func() bool {
		return signed.state(t).Received == uint64(len(exports))
	})
	if st := signed.state(t); !st.Established || st.Learned != 0 {
		t.Errorf("speaker state %+v: want established with %d routes received and none in the RIB", st, len(exports))
	} else {
		t.Logf("the router sent %d routes: %d received, %d in the speaker's RIB", len(exports), st.Received, st.Learned)
	}

	// The wrong password: the kernels drop every segment, the session
	// never opens. Watched for long enough to see several connect
	// retries (one a second).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if st := wrong.state(t); st.Established {
			t.Fatalf("the session with the wrong password came up: %+v", st)
		}
		if strings.Contains(birdc("show", "protocols", "n1"), "Established") {
			t.Fatalf("bird established the session with the wrong password:\n%s", birdc("show", "protocols", "all", "n1"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, n := primary(birdc, vip); n != 1 {
		t.Errorf("the router has %d paths for %s; want the signed session's alone", n, vip)
	}
	t.Logf("wrong password: no session in 5 s (%s)", strings.TrimSpace(lastLine(birdc("show", "protocols", "n1"))))

	// The same node with the right password and a limit under what the
	// router sends: the session comes up, the routes overflow the limit,
	// the speaker ends it (its NOTIFICATION says why, when it reaches
	// bird before the connection closes).
	wrong.kill()
	limitLog := filepath.Join(dir, "n1.log")
	limited := startSpeakerWith(t, 1, helperConfig{PeerASN: routerASN, Password: "right horse battery",
		MaxPrefixes: len(exports) - 1, Log: limitLog})
	limited.advertise(t, Route{Addr: netip.MustParseAddr(vip)})
	ended := func() bool {
		b, _ := os.ReadFile(limitLog)
		return strings.Contains(string(b), "prefix limit reached")
	}
	for limit := time.Now().Add(20 * time.Second); !ended(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(limit) {
			t.Fatalf("no session end on the prefix limit within 20 s: speaker %+v, router:\n%s", limited.state(t), birdc("show", "protocols", "all", "n1"))
		}
	}
	waitFor(t, 5*time.Second, "the session over the limit to end", func() bool {
		return !limited.state(t).Established && !strings.Contains(birdc("show", "protocols", "n1"), "Established")
	})
	t.Logf("prefix limit %d, %d sent: session ended; router: %s", len(exports)-1, len(exports), strings.TrimSpace(lastLine(birdc("show", "protocols", "n1"))))

	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "horse") {
		t.Errorf("the speaker's log holds the password")
	}
	if !strings.Contains(string(log), "[redacted]") {
		t.Errorf("the speaker's log of its configuration shows no redacted password: is the check looking at it?")
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
