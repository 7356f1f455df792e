// Command testsummary reads `go test -json` on stdin, prints one line per
// package as results arrive and the full output of every failed test, and
// ends with one line: "tests: N passed, N failed, N skipped". It exits 1
// if any test or package failed. Skipped tests are counted apart: a skip is
// never a pass.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
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
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || len(failedPkgs) > 0 {
		os.Exit(1)
	}
}
