package rawhttp

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// pinned is what one case did on one HAProxy version.
type pinned struct {
	status  string // the first answer, or closed/reset/timeout/garbage
	answers int    // complete responses on the connection
	// forwarded: HAProxy sent the case's marker to the backend at all;
	// backend: requests carrying it that Go's server handed to the
	// handler (fewer when Go refuses what HAProxy passed on).
	forwarded bool
	backend   int
	view      string // rawCase.view of those requests, when the case has one
}

func (p pinned) String() string {
	return fmt.Sprintf("{status: %q, answers: %d, forwarded: %v, backend: %d, view: %q}",
		p.status, p.answers, p.forwarded, p.backend, p.view)
}

// expectations are keyed by the full `haproxy -v` version.
var expectations = map[string]map[string]pinned{
	"2.6.12-1+deb12u4": haproxy_2_6_12_1_deb12u4,
}

// TestMalformedHTTP sends every case to HAProxy running pier's rendered
// configuration and compares the outcome with the table pinned for the
// HAProxy version. Whatever the version, a request hidden in another
// request's bytes must never reach the backend.
func TestMalformedHTTP(t *testing.T) {
	version := haproxyVersion(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	rec, member := startBackend(t)
	addr := startHAProxy(t, member)
	want, known := expectations[version]

	var mu sync.Mutex
	got := map[string]pinned{}
	t.Run("haproxy-"+version, func(t *testing.T) {
		for _, c := range cases() {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				p := run(t, addr, rec, c)
				mu.Lock()
				got[c.name] = p
				mu.Unlock()
				if known && p != want[c.name] {
					t.Errorf("got  %s\nwant %s", p, want[c.name])
				}
			})
		}
	})
	if !known || t.Failed() {
		t.Errorf("HAProxy %s: observed table (review, then pin it in expect_test.go):\n%s", version, table(got))
	}
	if known && len(want) != len(got) {
		t.Errorf("table for %s has %d cases, ran %d", version, len(want), len(got))
	}
}

// run sends one case and looks at the backend. A request HAProxy
// forwarded is recorded before the backend answers, hence before the
// client gets that answer; the pause covers what HAProxy may forward
// after answering the client (a head sent before a body error).
func run(t *testing.T, addr string, rec *recorder, c rawCase) pinned {
	// The trailing slash keeps one case's marker from being a prefix of
	// another's.
	marker, hidden := "/c/"+c.name+"/", "/smuggled/"+c.name+"/"
	out, err := exchange(addr, c.build(marker, hidden), c.waitFor())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if s := rec.matching(hidden); len(s) > 0 {
		t.Errorf("SMUGGLED: the backend got the hidden request: %s", target(s, nil))
	}
	if c.slow && out.status == "408" && out.elapsed < requestTimeout {
		t.Errorf("408 after %v, before the %v http-request timeout", out.elapsed, requestTimeout)
	}
	seen := rec.matching(marker)
	p := pinned{status: out.status, answers: out.responses, forwarded: rec.forwarded(marker), backend: len(seen)}
	if c.view != nil {
		p.view = c.view(seen, rec.bytes())
	}
	return p
}

func table(got map[string]pinned) string {
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\t%q: %s,\n", n, got[n])
	}
	return b.String()
}
