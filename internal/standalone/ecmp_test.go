package standalone

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/bgp"
)

// TestBirdConfigBFD: with BFD the lab router's bird runs a bfd protocol at
// the nodes' timers and `bfd on` in every node's session; without, none.
// bird itself parses both (bird -p) when it is installed.
func TestBirdConfigBFD(t *testing.T) {
	router := netip.MustParseAddr("10.99.0.2")
	nodes := []netip.Addr{netip.MustParseAddr("10.99.0.10"), netip.MustParseAddr("10.99.0.11")}
	with := birdConfig(router, labASN, nodes, labBGPPort, labHoldTime, bgp.BFD{Enabled: true, Interval: 50 * time.Millisecond, Multiplier: 4})
	without := birdConfig(router, labASN, nodes, labBGPPort, labHoldTime, bgp.BFD{})
	defaults := birdConfig(router, labASN, nodes, labBGPPort, labHoldTime, bgp.BFD{Enabled: true})
	if !strings.Contains(with, "protocol bfd {") || !strings.Contains(with, "interval 50 ms; multiplier 4;") || strings.Count(with, "  bfd on;\n") != 2 {
		t.Errorf("with BFD:\n%s", with)
	}
	if !strings.Contains(defaults, "interval 100 ms; multiplier 3;") {
		t.Errorf("with BFD at the defaults:\n%s", defaults)
	}
	if strings.Contains(without, "bfd") {
		t.Errorf("without BFD:\n%s", without)
	}
	if _, err := exec.LookPath("bird"); err != nil {
		t.Log("bird not installed: the configurations are not parsed")
		return
	}
	for name, conf := range map[string]string{"with": with, "without": without} {
		p := filepath.Join(t.TempDir(), "bird.conf")
		if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("bird", "-p", "-c", p).CombinedOutput(); err != nil {
			t.Errorf("bird refuses the configuration %s BFD: %v: %s\n%s", name, err, out, conf)
		}
	}
}
