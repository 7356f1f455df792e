package annotation

import (
	"strings"
	"testing"
)

func FuzzRegexRewriteTarget(f *testing.F) {
	for _, s := range []string{"/$1", "/a/$2", "/$1;evil", "/$1%[src]", "/$0", "/$1'", "/$1\\2", "/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		target, _, groups, err := parseRewriteTarget(v)
		if err != nil {
			return
		}
		noControl(t, v, target)
		if strings.ContainsAny(target, "%\\;\"") || groups < 0 || groups > 9 || (groups == 0) == strings.Contains(target, "$") {
			t.Fatalf("%q accepted as %q with %d groups", v, target, groups)
		}
	})
}
