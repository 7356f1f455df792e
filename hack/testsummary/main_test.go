package main

import (
	"strings"
	"testing"
)

// A failed test's digest keeps the lines the test wrote and drops what it
// copied from a daemon's log, so the reason survives a long dump.
func TestDigestKeepsTheTestsOwnLines(t *testing.T) {
	output := []string{
		"=== RUN   TestPair\n",
		"    pair_test.go:120: HAProxy killed: first success after 300ms\n",
		"    pair_test.go:131: unplanned failover took 2s, target 1s\n",
		"    pair_test.go:90: pier run log (tail):\n        Thu Dec  3: Sending gratuitous ARP on eth0\n        Thu Dec  3: Stopping\n",
		"--- FAIL: TestPair (31.78s)\n",
	}
	got := digest("pier.dev/pier/test/pair", "TestPair", output)
	want := "FAIL pier.dev/pier/test/pair TestPair\n" +
		"    pair_test.go:120: HAProxy killed: first success after 300ms\n" +
		"    pair_test.go:131: unplanned failover took 2s, target 1s\n" +
		"    pair_test.go:90: pier run log (tail):\n"
	if got != want {
		t.Errorf("digest:\n%s\nwant:\n%s", got, want)
	}
}

// A digest keeps the last lines, where a failure is, and cuts long ones.
func TestDigestKeepsTheLastLinesShort(t *testing.T) {
	var output []string
	for i := 0; i < 40; i++ {
		output = append(output, "    x_test.go:1: "+strings.Repeat("a", 400)+"\n")
	}
	got := strings.Split(strings.TrimSuffix(digest("p", "T", output), "\n"), "\n")
	if len(got) != 27 || got[1] != "    (15 lines before these)" {
		t.Fatalf("digest has %d lines, second %q; want the header, a count and 25 lines", len(got), got[1])
	}
	if l := got[2]; len(l) != 4+300+len(" …") {
		t.Errorf("a long line is %d bytes, want it cut at 300", len(l))
	}
}
