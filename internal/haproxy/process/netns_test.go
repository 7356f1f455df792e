package process

import (
	"context"
	"strings"
	"testing"
)

func TestCheckNetns(t *testing.T) {
	for _, name := range []string{"", "n1", "pier-hap-12-t1", "a_b", strings.Repeat("a", 32)} {
		if err := CheckNetns(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, name := range []string{"-x", "N1", "a b", "a/b", "../x", "x;y", "x\n", strings.Repeat("a", 33), ".", "_a"} {
		if err := CheckNetns(name); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	inst := New(Config{Dir: t.TempDir(), Netns: "bad name"})
	if err := inst.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "network namespace") {
		t.Fatalf("Start with a bad namespace name: %v", err)
	}
}
