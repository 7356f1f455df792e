package netnsdo

import (
	"context"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, name := range []string{"", "n1", "pier-hap-12-t1", "a_b", strings.Repeat("a", 32)} {
		if err := CheckName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, name := range []string{"-x", "N1", "a b", "a/b", "../x", "x;y", "x\n", strings.Repeat("a", 33), ".", "_a"} {
		if err := CheckName(name); err == nil {
			t.Errorf("%q accepted", name)
		}
		if err := Command(context.Background(), name, "true").Run(); err == nil {
			t.Errorf("a command in namespace %q ran", name)
		}
	}
}
