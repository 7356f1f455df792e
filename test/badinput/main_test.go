package badinput

import (
	"testing"
	"time"
)

// TestBadInputs runs the table row by row against one `pier run` while
// the victim is under load, then checks the victim's traffic.
func TestBadInputs(t *testing.T) {
	start := time.Now()
	b := startBench(t)
	b.runRefusals(t)
	b.finish(t, start)
}
