package conformance

import (
	"context"
	"io"
	"regexp"
	"strings"

	"github.com/cucumber/godog"
)

// RunSuite runs the features at paths against cluster, one scenario at a
// time, and returns godog's status: 0 when every scenario passed. Strict:
// an undefined or pending step fails the run. format is a godog format
// list ("pretty", "pretty,junit:report.xml"); empty means "pretty".
func RunSuite(ctx context.Context, cluster Cluster, opts Options, paths []string, format string, out io.Writer) int {
	if format == "" {
		format = "pretty"
	}
	suite := godog.TestSuite{
		Name: "conformance",
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			InitializeScenario(sc, cluster, opts)
		},
		Options: &godog.Options{
			Format:         format,
			Paths:          paths,
			Strict:         true,
			StopOnFailure:  opts.StopOnFailure,
			Concurrency:    1,
			NoColors:       true,
			Output:         out,
			DefaultContext: ctx,
		},
	}
	return suite.Run()
}

// summaryLine matches godog's closing lines: "30 scenarios (30 passed)",
// "150 steps (150 passed)" and the duration.
var summaryLine = regexp.MustCompile(`^(\d+ scenarios? \(|\d+ steps? \(|No scenarios|No steps|\d+m\d+(\.\d+)?s$)`)

// Summary extracts godog's summary from its pretty output.
func Summary(output string) string {
	var lines []string
	for line := range strings.Lines(output) {
		line = strings.TrimSpace(line)
		if summaryLine.MatchString(line) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}
