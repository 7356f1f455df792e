package fuzz

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// recorder is a testing.TB whose Fatalf records instead of failing, so
// the checkers themselves can be tested on files that must fail.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func fails(t *testing.T, check func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.msg
}

// TestCheckersCatch: each broken file below must be caught, or the fuzz
// targets would pass whatever the renderer did.
func TestCheckersCatch(t *testing.T) {
	lb := &model.LoadBalancer{Listeners: []model.Listener{{Policies: []model.L7Policy{{Rules: []model.L7Rule{
		{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: "a.example"},
		{Type: model.RulePath, Compare: model.CompareStartsWith, Value: "/a b"},
	}}}}}}
	header := "# pier load balancer x\n# generated; do not edit\n"
	good := header + "    acl p_1_0 var(txn.pier_host) -m str 'a.example'\n" +
		"    acl p_1_1 path -m str '/a b'\n    acl p_1_1 path -m beg '/a b/'\n"
	if msg := fails(t, func(tb testing.TB) { checkConfig(tb, []byte(good), nil, lb) }); msg != "" {
		t.Fatalf("good file refused: %s", msg)
	}
	for name, cfg := range map[string]string{
		"comment":      good + "    acl x path -m str '/a' #x\n",
		"comment line": good + "# x\n",
		"env":          good + "    acl x path -m str \"$HOME\"\n",
		"escape":       good + "    acl x path -m str a\\ b\n",
		"CR":           good + "    acl x path -m str a\r\n",
		"no final LF":  strings.TrimSuffix(good, "\n"),
		"split value":  strings.Replace(good, "'/a b'", "/a b", 1),
		"65 words":     good + "    x" + strings.Repeat(" y", 64) + "\n",
		"value lost":   strings.Replace(good, "'a.example'", "'b.example'", 1),
		"wrong fetch":  strings.Replace(good, "var(txn.pier_host)", "req.hdr(host)", 1),
		"quote":        good + "    acl x path -m str 'a\n",
	} {
		if msg := fails(t, func(tb testing.TB) { checkConfig(tb, []byte(cfg), nil, lb) }); msg == "" {
			t.Errorf("%s: not caught", name)
		}
	}
	for _, s := range []string{"a\nb", "a\x1b[31m", "\u202egnp", "a\u200bb", "\xff", "a\u0085"} {
		p := []model.Problem{{Message: "invalid path " + s}}
		if msg := fails(t, func(tb testing.TB) { checkProblems(tb, p) }); msg == "" {
			t.Errorf("problem message %q not caught", s)
		}
	}
}
