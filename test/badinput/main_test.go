package badinput

import (
	"testing"
	"time"
)

// TestBadInputs runs the table row by row against one `pier run` while
// the victim is under load, then checks what the victim saw throughout.
// B23 (the admission webhook) is not here: pier has no webhook yet.
func TestBadInputs(t *testing.T) {
	start := time.Now()
	b := startBench(t)
	b.runRefusals(t)
	b.runLiteralPaths(t)
	t.Run("B17", b.runSnippets)
	t.Run("B18-foreign-annotations", b.runAnnotationSizes)
	t.Run("B19", b.runTLS)
	t.Run("B20", b.runCrossNamespace)
	t.Run("B21", b.runBadBackends)
	t.Run("B22", b.runConflict)
	t.Run("B24", b.runThousandPaths)
	t.Run("TCPRoute", b.runTCPRoutes)
	b.finish(t, start)
}
