package render

import (
	"bytes"
	"strings"
	"testing"
)

// TestDrainSwitch pins the three places that must name the same
// variable: process.conf's initial value, the frontend rule and the
// runtime commands.
func TestDrainSwitch(t *testing.T) {
	for _, on := range []bool{false, true} {
		conf, err := ProcessConf(procAt(fixtureDir), on)
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "int(0)", true: "int(1)"}[on]
		if !bytes.Contains(conf, []byte("\n    set-var proc.pier_drain "+want+"\n")) {
			t.Errorf("draining=%v: process.conf lacks the initial value %s:\n%s", on, want, conf)
		}
		cmds := DrainCommands(on)
		if len(cmds) != 2 || cmds[0] != "experimental-mode on" || cmds[1] != "set var proc.pier_drain "+want {
			t.Errorf("DrainCommands(%v) = %q", on, cmds)
		}
	}
	for _, f := range fixtures() {
		r := mustRender(t, f.lb, nil)
		// The TCP frontends of ssl-passthrough carry no HTTP to drain.
		frontends := strings.Count(string(r.Fragment), "\nfrontend ") - strings.Count(string(r.Fragment), " from pier_tcp\n    mode tcp\n    bind ")
		rules := strings.Count(string(r.Fragment), "\n    http-after-response set-header Connection close if { var(proc.pier_drain) -m bool }\n")
		if frontends == 0 || rules != frontends {
			t.Errorf("%s: %d frontends, %d drain rules", f.name, frontends, rules)
		}
	}
}
