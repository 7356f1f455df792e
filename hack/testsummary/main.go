// Command testsummary reads `go test -json` on stdin, prints one line per
// package as results arrive and the full output of every failed test, and
// ends with one line: "tests: N passed, N failed, N skipped". It exits 1
// if any test or package failed. Skipped tests are counted apart: a skip is
// never a pass.
//
// Just before that last line it repeats, for every failed test and
// subtest, only the lines the test itself wrote (t.Log, t.Error: those
// that begin with "file.go:NN:"), each cut to one line. A failing suite
// often dumps daemon logs as it ends, and a reader who sees only the tail
// of CI's output must still find why it failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	outputs := map[string][]string{} // "pkg test" → lines
	var passed, failed, skipped int
	var failedPkgs []string
	var skippedTests []string
	var digests []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			fmt.Println(sc.Text()) // build errors arrive as plain text
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			outputs[key] = append(outputs[key], ev.Output)
		case "pass", "fail", "skip":
			if ev.Test == "" {
				fmt.Printf("%-4s %s %.1fs\n", ev.Action, ev.Package, ev.Elapsed)
				if ev.Action == "fail" {
					failedPkgs = append(failedPkgs, ev.Package)
					fmt.Print(strings.Join(outputs[key], ""))
				}
				continue
			}
			if strings.Contains(ev.Test, "/") {
				// Subtests count through their parent, but a failing one
				// is where the message is: print it.
				if ev.Action == "fail" {
					fmt.Printf("--- FAIL %s %s\n%s", ev.Package, ev.Test, strings.Join(outputs[key], ""))
					digests = append(digests, digest(ev.Package, ev.Test, outputs[key]))
				}
				delete(outputs, key)
				continue
			}
			switch ev.Action {
			case "pass":
				passed++
			case "fail":
				failed++
				fmt.Printf("--- FAIL %s %s\n%s", ev.Package, ev.Test, strings.Join(outputs[key], ""))
				digests = append(digests, digest(ev.Package, ev.Test, outputs[key]))
			case "skip":
				skipped++
				skippedTests = append(skippedTests, ev.Package+" "+ev.Test)
			}
			delete(outputs, key)
		}
	}
	sort.Strings(skippedTests)
	for _, s := range skippedTests {
		fmt.Println("skipped:", s)
	}
	if len(digests) > 0 {
		fmt.Println("== what the failed tests said (their own lines only; full output above)")
		for _, d := range digests {
			fmt.Print(d)
		}
	}
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || len(failedPkgs) > 0 {
		os.Exit(1)
	}
}

// testLine matches a line a test wrote through its testing.T: indented,
// then "name.go:NN: ". Continuation lines of a multi-line message, and
// whatever a test copies from a daemon's log, do not match.
var testLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// digest is a failed test's own lines, at most maxDigestLines of them
// (the last ones, where the failure is), each cut at maxDigestWidth.
func digest(pkg, test string, output []string) string {
	const maxDigestLines, maxDigestWidth = 25, 300
	var lines []string
	for _, o := range output {
		for _, l := range strings.Split(o, "\n") {
			if testLine.MatchString(l) {
				l = strings.TrimSpace(l)
				if len(l) > maxDigestWidth {
					l = l[:maxDigestWidth] + " …"
				}
				lines = append(lines, l)
			}
		}
	}
	if len(lines) > maxDigestLines {
		lines = append([]string{fmt.Sprintf("(%d lines before these)", len(lines)-maxDigestLines)}, lines[len(lines)-maxDigestLines:]...)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "FAIL %s %s\n", pkg, test)
	for _, l := range lines {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}
