package web

import (
	"strings"
	"testing"
)

func TestRedactPasswords(t *testing.T) {
	conf := "frontend fe\n    http-request auth realm 'x'\n\nuserlist ul_a\n    user 'alice' password '$2y$05$abc'\n    user 'bob' password '$6$salt$hash'\n"
	got := string(redactPasswords([]byte(conf)))
	if strings.Contains(got, "$2y$") || strings.Contains(got, "$6$") || !strings.Contains(got, "    user 'bob' password <redacted>\n") ||
		!strings.HasPrefix(got, "frontend fe\n    http-request auth realm 'x'\n") {
		t.Errorf("redacted:\n%s", got)
	}
}
