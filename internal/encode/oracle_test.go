package encode

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// These tests hold the Tokenize model and the encoder against the real
// HAProxy: "haproxy -c" on a file of ".notice <fragment>" lines. HAProxy
// echoes the first argument of .notice verbatim, and refuses a second one
// naming it, so both the words and the errors can be compared.

func haproxyBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not installed")
	}
	return bin
}

// oracleFragments are raw line fragments, many of them hostile.
func oracleFragments() []string {
	frags := []string{
		`hello`, `"a b" c`, `'x$HOME'`, `"$PIER_T"`, `"${PIER_T[*]}"`, `"${PIER_NOPE-def}x"`,
		`"${PIER_T-def}"`, `a\x41b`, `end\`, "tr\rail x", `a\xZZ`, `a#b`, `'a\'b`, `"a'b"`,
		`\'x`, `"$9"`, `""`, `''`, `a\ b`, `"a\tb"`, `x\"y`, `"\$x"`, `\$x`, `$PIER_T`,
		`"$.LINE"`, `"${.LINE}"`, `"$.NOPE"`, `"${PIER_T"`, `"${PIER_T[x]}"`, `'unterminated`,
		`"unterminated`, `a '' b`, `a ''`, `'' b`, "a \r b", `a \#b`, `"a#b"`, `'a#b'`, `\\`,
		`a\\`, `"\x41"`, `'\x41'`, `a"b c"d`, `a'b c'd`, `"a"'b'c`, `a\vb`, "a\tb", "a\x0bb",
		"a\x01b", "é", `#comment`, `  spaced  `, `"${PIER_T}${PIER_U}"`, `"$PIER_T$PIER_U"`,
		`"${_X}"`, `"$_"`, `"${PIER_T-}"`, `"${-x}"`, `\x4`, `"\'"`, `'"'`, `[x]`,
		strings.TrimSpace(strings.Repeat("w ", 63)), strings.Repeat("w ", 63),
	}
	for _, r := range badInputs() {
		if len(r.in) < 8<<10 && !strings.ContainsAny(r.in, "\n\x00") {
			frags = append(frags, r.in)
			if quotable(r.in) == nil {
				frags = append(frags, "'"+r.in+"'")
			}
		}
	}
	return frags
}

var noticeRE = regexp.MustCompile(`(?m)^\[(NOTICE|ALERT)\] +\(\d+\) : config : parsing \[[^:\]]+:(\d+)\]: (.*)$`)

type echo struct {
	alert bool
	text  string // the rest of the message
}

// runNotices writes one ".notice <frag>" line per fragment and returns what
// HAProxy said per line number.
func runNotices(t *testing.T, bin string, frags []string) (string, map[int]echo) {
	t.Helper()
	var b bytes.Buffer
	for _, f := range frags {
		b.WriteString(".notice " + f + "\n")
	}
	file := filepath.Join(t.TempDir(), "t.cfg")
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", "-f", file)
	cmd.Env = []string{"PIER_T=p q", "PIER_U=u"}
	out, _ := cmd.CombinedOutput()
	res := map[int]echo{}
	for _, m := range noticeRE.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[2])
		if prev, seen := res[n]; !seen || !prev.alert { // an alert wins
			res[n] = echo{alert: m[1] == "ALERT", text: m[3]}
		}
	}
	return file, res
}

func TestTokenizeMatchesHAProxy(t *testing.T) {
	bin := haproxyBin(t)
	frags := oracleFragments()
	for start := 0; start < len(frags); start += 40 { // HAProxy stops after 50 fatal errors
		chunk := frags[start:min(start+40, len(frags))]
		file, got := runNotices(t, bin, chunk)
		for i, f := range chunk {
			n := i + 1
			env := func(name string) (string, bool) {
				switch name {
				case "PIER_T":
					return "p q", true
				case "PIER_U":
					return "u", true
				case ".LINE":
					return strconv.Itoa(n), true
				case ".FILE":
					return file, true
				}
				return "", false
			}
			want := expectNotice(".notice "+f, env)
			if g := got[n].normal(); g != want.normal() {
				t.Errorf("line %d %s: haproxy %+v, model %+v", n, Printable(f), g, want)
			}
		}
	}
}

// expectNotice predicts HAProxy's message for a .notice line.
func expectNotice(line string, env func(string) (string, bool)) echo {
	toks, err := Tokenize(line, env)
	if err != nil {
		return echo{alert: true, text: alertText(err)}
	}
	w := append(toks.Words, "", "")
	if w[2] != "" { // HAProxy tests *args[2]: an empty third word passes
		return echo{alert: true, text: "Unexpected argument '" + w[2] + "' for '.notice'. Use quotes if the message should contain spaces."}
	}
	arg := w[1]
	if i := strings.IndexByte(arg, 0); i >= 0 {
		arg = arg[:i] // printed with %s
	}
	return echo{text: "'" + arg + "'."}
}

func alertText(err error) string {
	switch err {
	case ErrTooManyArgs:
		return "too many words, truncating after word 64, position"
	}
	return err.Error() + " at position"
}

// Normalise alert texts that carry positions: compare the stable prefix.
// A word with a line feed (from \n or \x0a) is compared up to it, as
// the message is read line by line.
func (e echo) normal() echo {
	e.text, _, _ = strings.Cut(e.text, "\n")
	if e.alert {
		if i := strings.Index(e.text, " at position"); i >= 0 {
			e.text = e.text[:i+len(" at position")]
		}
		if i := strings.Index(e.text, ", position"); i >= 0 {
			e.text = e.text[:i+len(", position")]
		}
	}
	return e
}

// acceptedCorpus is valid values of every kind, chosen to carry the
// characters the tokenizer cares about where the allow-list permits them.
func acceptedCorpus(t *testing.T) (hosts, paths, headerValues []Value) {
	t.Helper()
	must := func(v Value, err error) Value {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, h := range []string{"example.com", "my-host", "xn--bcher-kva.example", "a.b-c.d"} {
		hosts = append(hosts, must(Host(h)))
	}
	hosts = append(hosts, must(WildcardHost("*.foo.com")), must(WildcardHost("*.com")))
	for _, p := range []string{"/", "/foo", "/$HOME", "/$x$y", "/a%20b", "/~u;v=1,2", "/a.*", "/a)", "/(x", "/@:!&=+*", "/a$"} {
		paths = append(paths, must(Path(p, PathPrefix)))
	}
	for _, hv := range []string{"max-age=31536000; includeSubDomains", "a  b", "{x}[y]", "text/html;q=0.9, */*"} {
		headerValues = append(headerValues, must(HeaderValue(hv)))
	}
	return hosts, paths, headerValues
}

func TestEncodedValuesRoundTripThroughHAProxy(t *testing.T) {
	bin := haproxyBin(t)
	hosts, paths, hvs := acceptedCorpus(t)
	u, _ := URL("https://example.com/a?b=$c&d=%41")
	all := append(append(append(hosts, paths...), hvs...), u)
	var frags []string
	for _, v := range all {
		line, err := ConfigLine(v.Word())
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, line)
	}
	_, got := runNotices(t, bin, frags)
	for i, v := range all {
		if want := (echo{text: "'" + v.String() + "'."}); got[i+1] != want {
			t.Errorf("%s: haproxy said %+v", Printable(v.String()), got[i+1])
		}
	}
}

// TestEncodedValuesInACLs checks that HAProxy accepts, with zero warnings,
// the contexts the renderer uses for each kind.
func TestEncodedValuesInACLs(t *testing.T) {
	bin := haproxyBin(t)
	hosts, paths, hvs := acceptedCorpus(t)
	var c Config
	c.Section(Lit("defaults"))
	c.Line(Lit("mode"), Lit("http"))
	for _, k := range []keyword{"connect", "client", "server"} {
		c.Line(Lit("timeout"), Lit(k), Millis(5e9))
	}
	c.Section(Lit("frontend"), Lit("f"))
	c.Line(Lit("bind"), AddrPort(mustAddr("127.0.0.1"), 1))
	for i, v := range hosts {
		c.Line(Lit("acl"), Concat(Lit("h"), Num(i)), Lit("var(txn.host)"), Lit("-m"), Lit("str"), v.Word())
	}
	for i, v := range paths {
		c.Line(Lit("acl"), Concat(Lit("p"), Num(i)), Lit("path"), Lit("-m"), Lit("beg"), v.Word())
	}
	for _, v := range hvs {
		c.Line(Lit("http-request"), Lit("set-header"), Lit("X-T"), v.Word())
	}
	c.Line(Lit("http-request"), Lit("deny"), Lit("if"), Lit("h0"), Lit("p0"))
	cfg, err := c.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "acl.cfg")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-dW", "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, cfg)
	}
}
