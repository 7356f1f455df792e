package badinput

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// settle is how long a row waits after pier's verdict before it checks
// that nothing else moved: a wrong write or reload of the victim would
// show within it (the agent reacts to the store at once).
const settle = 200 * time.Millisecond

// attack is one attacker's manifests, written as one file.
type attack struct {
	ns   string
	objs []runtime.Object
	raw  string // spliced over rawPlaceholder after encoding, if set
	// extra, if set, is written as a second file: a document the
	// manifest reader refuses whole must not take the Ingress with it.
	extra []byte
	files []string
}

// launch writes the attacker's file and waits until pier knows the
// Ingress ns/name; the problems it returns are those of that snapshot.
func (b *bench) launch(t *testing.T, a *attack, name string) *api.IngressResponse {
	t.Helper()
	doc := list(t, a.objs...)
	if a.raw != "" {
		doc = rawPayload(doc, a.raw)
	}
	if a.extra != nil {
		a.files = append(a.files, filepath.Join(b.manifests, "attack-"+a.ns+"-extra.json"))
		harness.WriteFile(t, a.files[0], string(a.extra))
	}
	a.files = append(a.files, filepath.Join(b.manifests, "attack-"+a.ns+".json"))
	harness.WriteFile(t, a.files[len(a.files)-1], string(doc))
	t.Cleanup(func() { b.withdraw(t, a) })
	var ing *api.IngressResponse
	harness.WaitFor(t, 15*time.Second, "pier's verdict on "+a.ns+"/"+name, func() bool {
		got, err := b.p.Ingress(a.ns, name)
		ing = got
		return err == nil && got.Ingress != nil
	})
	return ing
}

// withdraw removes the attacker's file and waits until pier has forgotten
// it: Ingresses gone from the API and the state dir back to its baseline.
func (b *bench) withdraw(t *testing.T, a *attack) {
	t.Helper()
	for _, f := range a.files {
		if err := os.Remove(f); err != nil {
			t.Errorf("remove %s: %v", f, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, err := b.p.Ingress(a.ns, "evil")
		if err != nil && strings.Contains(err.Error(), "404") && len(b.entries(t)) == len(b.baseline) &&
			b.p.Metric("pier_loadbalancers") == 1 {
			b.checkEntries(t, 0)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("attacker %s still present 20s after its file was removed: entries %v", a.ns, sortedSet(b.entries(t)))
}

// launchServed is launch for an Ingress pier must serve: it also waits
// for its status and returns the first address (the VIP).
func (b *bench) launchServed(t *testing.T, a *attack, name string) (*api.IngressResponse, string) {
	t.Helper()
	b.launch(t, a, name)
	return b.awaitServed(t, a.ns, name)
}

// awaitServed waits until ns/name publishes an address.
func (b *bench) awaitServed(t *testing.T, ns, name string) (*api.IngressResponse, string) {
	t.Helper()
	var ing *api.IngressResponse
	harness.WaitFor(t, 20*time.Second, ns+"/"+name+" served", func() bool {
		got, err := b.p.Ingress(ns, name)
		if err == nil && len(got.Status.LoadBalancer.Ingress) > 0 {
			ing = got
			return true
		}
		return false
	})
	return ing, ing.Status.LoadBalancer.Ingress[0].IP
}

// checkRefused checks the refusal itself: an Error naming what, safe
// messages, and no address in status.
func checkRefused(t *testing.T, ing *api.IngressResponse, what, payload string) {
	t.Helper()
	var named bool
	var errs int
	for _, pr := range ing.Problems {
		if pr.Severity != model.SeverityError {
			continue
		}
		errs++
		named = named || strings.Contains(pr.Field+" "+pr.Message, what)
	}
	switch {
	case errs == 0:
		t.Errorf("not refused; problems: %s", problemList(ing.Problems))
	case !named:
		t.Errorf("no Error names %q; problems: %s", what, problemList(ing.Problems))
	}
	checkProblemText(t, ing.Problems, payload)
	checkNoAddress(t, ing)
}

func checkNoAddress(t *testing.T, ing *api.IngressResponse) {
	t.Helper()
	if lbs := ing.Status.LoadBalancer.Ingress; len(lbs) != 0 {
		t.Errorf("a refused Ingress published addresses %v", lbs)
	}
}

// maxMessage bounds a problem message: the value in it is truncated to
// about 64 bytes, the rest is pier's own text.
const maxMessage = 512

// checkProblemText checks every problem's field and message: valid UTF-8,
// no control, format or bidi character raw, bounded, payload truncated
// and its quotes escaped.
func checkProblemText(t *testing.T, problems []model.Problem, payload string) {
	t.Helper()
	for _, pr := range problems {
		for _, s := range []string{pr.Field, pr.Message} {
			if bad := unsafeRune(s); bad != "" {
				t.Errorf("problem %s carries %s raw: %q", pr.Reason, bad, s)
			}
		}
		if len(pr.Message) > maxMessage {
			t.Errorf("problem %s message is %d bytes, want ≤ %d", pr.Reason, len(pr.Message), maxMessage)
		}
		if len(payload) > 64 && strings.Contains(pr.Message, payload) {
			t.Errorf("problem %s repeats the whole %d-byte value", pr.Reason, len(payload))
		}
		// A '"' left raw ends the quoted value early: the rest of the
		// value then reads as pier's own words.
		if strings.Contains(payload, `"`) && strings.Contains(pr.Message, payload) {
			t.Errorf("problem %s quotes the value with its '\"' unescaped: %s", pr.Reason, pr.Message)
		}
	}
}

// unsafeRune names the first character that must not reach an Event or
// a log raw (a control byte could forge a log line or move a
// terminal's cursor), or returns "".
func unsafeRune(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return "control character " + strconv.QuoteRune(r)
		case unicode.Is(unicode.Cf, r):
			return "format/bidi character " + strconv.QuoteRuneToASCII(r)
		case r == utf8.RuneError:
			return "a replacement character"
		}
	}
	return ""
}

func problemList(ps []model.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\n  " + string(p.Severity) + " " + p.Reason + " [" + p.Field + "] " + p.Message)
	}
	return b.String()
}

func hasError(ps []model.Problem) bool {
	for _, p := range ps {
		if p.Severity == model.SeverityError {
			return true
		}
	}
	return false
}

// findProblem returns the first problem with severity and reason.
func findProblem(ps []model.Problem, sev model.Severity, reason string) *model.Problem {
	for i := range ps {
		if ps[i].Severity == sev && ps[i].Reason == reason {
			return &ps[i]
		}
	}
	return nil
}

// checkIsolated is the row's "nothing else is affected", after settle:
// the victim's config, reloads, the state dir, TMPDIR and HOME, and the
// markers in HAProxy files. Refused input (newLBs 0) starts and reloads
// nothing. Each load balancer it adds joins a shard (pier's default): a
// start of a shard not running yet or a reload of one that runs, the
// victim's perhaps, which the load on the victim checks is seamless;
// several joining at once may share one reload.
func (b *bench) checkIsolated(t *testing.T, before reloads, newLBs int, markers []string) {
	t.Helper()
	time.Sleep(settle)
	b.checkVictimUntouched(t)
	after := b.reloads()
	// A new load balancer costs at most one start or reload (it joins a
	// shard), and may land first (served by the landing process until its
	// shard's deferred reload); refused input costs neither.
	loads := int(after.ok-before.ok) + int(after.started-before.started)
	landed := int(after.landed - before.landed)
	if after.failed != before.failed || (newLBs == 0 && loads+landed != 0) ||
		(newLBs > 0 && (loads+landed < 1 || loads > newLBs || landed > newLBs)) {
		t.Errorf("HAProxy reloads moved from %+v to %+v; want %d load balancer(s) loaded with at most as many starts, reloads and landings each, none for refused input", before, after, newLBs)
	}
	b.checkEntries(t, newLBs)
	b.checkMarkers(t, markers, false)
}

// client opens a connection per request: an idle keep-alive connection
// would hold an attacker's HAProxy in its soft stop until hard-stop-after.
var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get sends one request through HAProxy and returns the status and, for a
// 200, the echo service that answered.
func (b *bench) get(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	code, reply, _, err := harness.Get(client, addr, b.p.HTTPPort, host, path)
	if err != nil {
		t.Errorf("GET %s%s via %s: %v", host, path, addr, err)
	}
	return code, reply.Service
}

// expectRoute checks one request's outcome: a service name or a status.
func (b *bench) expectRoute(t *testing.T, addr, host, path, want string) {
	t.Helper()
	code, svc := b.get(t, addr, host, path)
	got := strconv.Itoa(code)
	if code == 200 {
		got = svc
	}
	if got != want {
		t.Errorf("GET %s%s via %s: got %s, want %s", host, path, addr, got, want)
	}
}
