package badinput

import (
	"testing"
	"time"
)

// TestBadInputs runs the table row by row against one `pier run` while
// the victim is under load, then checks what the victim saw throughout.
// An admission webhook's refusals are not here: pier has no webhook yet.
func TestBadInputs(t *testing.T) {
	start := time.Now()
	b := startBench(t)
	b.runRefusals(t)
	b.runLiteralPaths(t)
	t.Run("snippets", b.runSnippets)
	t.Run("huge-foreign-annotations", b.runAnnotationSizes)
	t.Run("bad-tls", b.runTLS)
	t.Run("cross-namespace-secret", b.runCrossNamespace)
	t.Run("bad-backends", b.runBadBackends)
	t.Run("path-conflict", b.runConflict)
	t.Run("thousand-paths", b.runThousandPaths)
	t.Run("TCPRoute", b.runTCPRoutes)
	t.Run("TLSRoute", b.runTLSRoutes)
	b.finish(t, start)
}
