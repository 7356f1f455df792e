package render

import (
	"strings"
	"testing"
)

// TestGlobalRetryOn pins the defaults' retry-on: empty-response by
// default (a member shutting down costs no request), connection failures
// only with NoEmptyResponseRetry (no copy of every request).
func TestGlobalRetryOn(t *testing.T) {
	for _, tc := range []struct {
		noEmpty bool
		want    string
	}{
		{false, "\n    retry-on conn-failure empty-response\n"},
		{true, "\n    retry-on conn-failure\n"},
	} {
		out, err := Global(Options{NoEmptyResponseRetry: tc.noEmpty})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(out); !strings.Contains(got, tc.want) || strings.Count(got, "retry-on") != 1 {
			t.Errorf("NoEmptyResponseRetry %v: want one retry-on line %q in\n%s", tc.noEmpty, tc.want, got)
		}
	}
}
