package render

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// TestMaxConfigBytes: a file one byte over the limit is refused by
// Config and PlanUpdate with ErrConfigTooLarge; at the limit it renders;
// unset means 16 MiB.
func TestMaxConfigBytes(t *testing.T) {
	if got := (Options{}).withDefaults().MaxConfigBytes; got != 16<<20 {
		t.Fatalf("default MaxConfigBytes %d", got)
	}
	lb := planFixture(members(20)...)
	cfg := mustRender(t, lb, nil).Fragment
	opts := fixtureOptions()
	opts.MaxConfigBytes = len(cfg)
	if at, err := Render(lb, fixtureAt, nil, opts); err != nil || string(at.Fragment) != string(cfg) {
		t.Fatalf("at the limit: %v", err)
	}
	opts.MaxConfigBytes = len(cfg) - 1
	out, err := Render(lb, fixtureAt, nil, opts)
	if !errors.Is(err, ErrConfigTooLarge) || out != nil {
		t.Fatalf("one byte over: %v", err)
	}
	for _, want := range []string{lb.UUID, strconv.Itoa(len(cfg)) + " bytes", "MaxConfigBytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := Render(lb, fixtureAt, nil, opts); !errors.Is(err, ErrConfigTooLarge) {
		t.Fatalf("render: %v", err)
	}
	opts.MaxConfigBytes = -1
	if _, err := Config(lb, opts); err == nil || !strings.Contains(err.Error(), "MaxConfigBytes") {
		t.Fatalf("negative limit: %v", err)
	}
}

// widest is a policy with the most rules one line can AND (64 words:
// "http-request set-var(...) int(N) if !pier_matched" and 59 names), each
// rule carrying the longest value its validator accepts.
func widest(policyID string, rules int) *model.LoadBalancer {
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	host := long('h', 63) + "." + long('o', 63) + "." + long('s', 63) + "." + long('t', 61)
	var rs []model.L7Rule
	for i := range rules {
		n := strconv.Itoa(i)
		switch i % 3 {
		case 0:
			rs = append(rs, pathIs("/"+n+long('e', encode.MaxPathLen-1-len(n))))
		case 1: // the "under" form adds a '/': MaxPathLen+1 bytes
			rs = append(rs, pathPrefix("/"+n+long('p', encode.MaxPathLen-1-len(n))))
		default:
			rs = append(rs, hostIs(host))
		}
	}
	web := pool("web", members(1)...)
	lb := newLB([]model.Listener{httpListener(web.ID, []model.L7Policy{toPool(web, rs...)})}, web)
	lb.Listeners[0].Policies[0].ID, lb.Listeners[0].Policies[0].Position = policyID, 1
	return lb
}

// TestLineLimits: the widest policy pier's IDs allow renders with every
// line within MaxLineBytes and encode.MaxLineArgs words (and HAProxy
// loads it); one rule more is refused for words, a longer policy ID for
// bytes.
func TestLineLimits(t *testing.T) {
	id := model.ID("policy", "widest")
	cfg := mustRender(t, widest(id, 59), nil).Fragment
	assertLinesTokenize(t, cfg)
	longest := 0
	for _, line := range strings.Split(string(cfg), "\n") {
		toks, _ := encode.Tokenize(line, func(string) (string, bool) { return "", false })
		if len(line) > MaxLineBytes || len(toks.Words) > encode.MaxLineArgs {
			t.Errorf("line of %d bytes, %d words: %.80s", len(line), len(toks.Words), line)
		}
		longest = max(longest, len(line))
	}
	t.Logf("longest line %d bytes of %d", longest, MaxLineBytes)
	haproxyCheck(t, cfg, nil)

	if _, err := Config(widest(id, 60), fixtureOptions()); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Fatalf("60 rules: %v", err)
	}
	// A hand-edited store may hold 64-character IDs: 59 ACL names of 69
	// bytes make a 4 KiB line, longer than HAProxy's first read buffer
	// but within MaxLineBytes, and HAProxy loads it.
	long := mustRender(t, widest(strings.Repeat("a", 64), 59), nil).Fragment
	assertLinesTokenize(t, long)
	haproxyCheck(t, long, nil)

	over := append([]byte("global\n    # "), strings.Repeat("x", MaxLineBytes)...)
	if err := checkLimits(over, DefaultMaxConfigBytes); err == nil ||
		!strings.Contains(err.Error(), "line 2 is "+strconv.Itoa(MaxLineBytes+6)+" bytes, the limit is "+strconv.Itoa(MaxLineBytes)) {
		t.Fatalf("a line over the limit: %v", err)
	}
}

// TestCrtListManyHosts: a certificate with more SNI names than one
// crt-list line takes is split over lines naming the same file, in host
// order, its first line still first; HAProxy loads it.
func TestCrtListManyHosts(t *testing.T) {
	var hosts []string
	for i := range 150 {
		hosts = append(hosts, "h"+strconv.Itoa(1000+i)+".example.com")
	}
	lb := widest(model.ID("p"), 1)
	lb.Listeners = append(lb.Listeners, model.Listener{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
		DefaultPoolID: lb.Pools[0].ID, Certificates: []model.Certificate{
			{ID: model.ID("c", "many"), Hosts: hosts, SHA256: "1"},
			{ID: model.ID("c", "other"), Hosts: []string{"other.example"}, SHA256: "2"},
		}})
	crt, err := CrtList(lb, fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(crt), "\n"), "\n")
	many, _ := fixtureAt.Cert(model.ID("c", "many"), "1")
	var got []string
	for i, line := range lines[:3] {
		words := strings.Split(line, " ")
		if words[0] != many || len(words) > encode.MaxLineArgs || (i < 2 && len(words) != encode.MaxLineArgs) {
			t.Fatalf("line %d: %d words, %.60s", i+1, len(words), line)
		}
		got = append(got, words[1:]...)
	}
	if strings.Join(got, " ") != strings.Join(hosts, " ") || len(lines) != 4 || !strings.HasSuffix(lines[3], " other.example") {
		t.Fatalf("crt-list:\n%s", crt)
	}
	haproxyCheck(t, mustRender(t, lb, nil).Fragment, lb)
}

// haproxyCheck runs "haproxy -c -dW" on a config rendered for
// fixtureDir, with lb's crt-list and certificates when lb is given.
func haproxyCheck(t *testing.T, cfg []byte, lb *model.LoadBalancer) {
	t.Helper()
	bin := haproxyBin(t)
	dir := t.TempDir()
	relocate := func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), fixtureDir, dir)) }
	if lb != nil {
		crt, err := CrtList(lb, fixtureOptions())
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, crtListAt(t, dir, crt), relocate(crt))
		writeCerts(t, dir, lb)
		writeMaps(t, mustRender(t, lb, nil).Maps, dir)
	}
	writeFile(t, lbAt(dir).Config(), relocate(cfg))
	checkFiles(t, bin, dir, lbAt(dir).Config())
}
