package encode

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestGRPCNames(t *testing.T) {
	for _, c := range []struct {
		service, method string
		rule            string // "" when accepted
	}{
		{"grpc.health.v1.Health", "Check", ""},
		{".pkg.Svc", "_do_1", ""},
		{"Svc", "M", ""},
		{"pkg.Svc;evil", "Check", "charset"},
		{"pkg.Svc", "Check;evil", "charset"},
		{"pkg/Svc", "Check", "charset"},
		{"pkg.Svc", "Check/x", "charset"},
		{"pkg.Svc", "Check\nuse_backend x", "charset"},
		{"pkg Svc", "Check", "charset"},
		{"pkg.Svc%", "Check", "charset"},
		{"pkg.Svc'", "Check", "charset"},
		{"pkg..Svc", "Check", "syntax"},
		{"pkg.Svc.", "Check", "syntax"},
		{"pkg.1Svc", "Check", "syntax"},
		{"pkg.Svc", "1Check", "syntax"},
		{"", "Check", "length"},
		{"pkg.Svc", "", "length"},
		{strings.Repeat("a", MaxGRPCName+1), "Check", "length"},
	} {
		svc, err1 := GRPCService(c.service)
		m, err2 := GRPCMethod(c.method)
		err := errors.Join(err1, err2)
		if c.rule == "" {
			if err != nil {
				t.Errorf("%q %q: %v", c.service, c.method, err)
			} else if got := GRPCMethodPath(svc, m); got != "/"+c.service+"/"+c.method {
				t.Errorf("%q %q: path %q", c.service, c.method, got)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Rule != c.rule {
			t.Errorf("%q %q: %v, want rule %s", c.service, c.method, err, c.rule)
			continue
		}
		if strings.ContainsAny(err.Error(), "\n") {
			t.Errorf("%q %q: the refusal carries a raw newline: %q", c.service, c.method, err)
		}
	}
}

// TestGRPCMethodRegex: each name is a whole segment of the :path, and
// neither expression can reach out of its own group.
func TestGRPCMethodRegex(t *testing.T) {
	for _, c := range []struct {
		service, method string
		match, miss     []string
	}{
		{`pkg\.Svc`, `Get.*`, []string{"/pkg.Svc/Get", "/pkg.Svc/GetAll"}, []string{"/xpkg.Svc/Get", "/pkg.Svc/xGet", "/pkg.SvcX/Get"}},
		{`a|b`, `M`, []string{"/a/M", "/b/M"}, []string{"/a|b/M", "/ab/M", "/a/MM"}},
		{"", `Check`, []string{"/grpc.health.v1.Health/Check"}, []string{"/Check", "//Check", "/a/b/Check2"}},
		{`grpc\..*`, "", []string{"/grpc.x/Any"}, []string{"/grpc.x/", "/other/Any"}},
	} {
		re, err := GRPCMethodRegex(c.service, c.method)
		if err != nil {
			t.Errorf("%q %q: %v", c.service, c.method, err)
			continue
		}
		goRE := regexp.MustCompile(strings.TrimPrefix(re.String(), matchLimitPrefix))
		for _, p := range c.match {
			if !goRE.MatchString(p) {
				t.Errorf("%q %q (%s): %s does not match", c.service, c.method, re, p)
			}
		}
		for _, p := range c.miss {
			if goRE.MatchString(p) {
				t.Errorf("%q %q (%s): %s matches", c.service, c.method, re, p)
			}
		}
	}
	for _, c := range []struct{ service, method string }{
		{`a)(?:b`, "M"},       // closes its group: refused on its own
		{"S", `x)|(?:.*`},     // likewise for the method
		{`a;evil b`, "M"},     // a space
		{"S", "M\nuse"},       // a newline
		{`(?i)s`, "M"},        // flags
		{"S", `(a+)+(b+)+c*`}, // unbounded repetitions nested
	} {
		if re, err := GRPCMethodRegex(c.service, c.method); err == nil {
			t.Errorf("%q %q accepted as %s", c.service, c.method, re)
		}
	}
}
