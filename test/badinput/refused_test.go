package badinput

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// target is where a row puts its payload in the attacker's Ingress.
type target struct {
	label string
	set   func(*networkingv1.Ingress, string)
	get   func(*networkingv1.Ingress) string
	names string // what the refusal's field or message must name
}

var (
	pathTarget = target{
		label: "path",
		set:   func(i *networkingv1.Ingress, v string) { i.Spec.Rules[0].HTTP.Paths[0].Path = v },
		get:   func(i *networkingv1.Ingress) string { return i.Spec.Rules[0].HTTP.Paths[0].Path },
		names: "spec.rules[0].http.paths[0]",
	}
	hostTarget = target{
		label: "host",
		set:   func(i *networkingv1.Ingress, v string) { i.Spec.Rules[0].Host = v },
		get:   func(i *networkingv1.Ingress) string { return i.Spec.Rules[0].Host },
		names: "spec.rules[0].host",
	}
)

func annotationTarget(key string) target {
	return target{
		label: key[strings.LastIndex(key, "/")+1:],
		set: func(i *networkingv1.Ingress, v string) {
			if i.Annotations == nil {
				i.Annotations = map[string]string{}
			}
			i.Annotations[key] = v
		},
		get:   func(i *networkingv1.Ingress) string { return i.Annotations[key] },
		names: "metadata.annotations[" + key + "]",
	}
}

const (
	annGroup   = "pier.dev/load-balancer"
	annIP      = "pier.dev/external-ip"
	annBalance = "pier.dev/balance"
	annHealth  = "pier.dev/health-check"
)

// refusalRow is a row of the table whose payloads must all be refused.
type refusalRow struct {
	id       string
	targets  []target // each payload is tried in each target
	payloads []string
	markers  []string // besides the payload itself and globalMarkers
}

// globalMarkers must never reach an HAProxy file: the words the payloads
// use, and "evil-", the prefix of every attacker namespace.
var globalMarkers = []string{"pwned", "evil", "acl x", "other_backend", "attacker_backend", "SECRET", "$PATH"}

var (
	oneMiB = strings.Repeat("a", 1<<20)
	// host254 is one byte over the DNS limit, with every label ≤ 63.
	host254 = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." +
		strings.Repeat("d", 62)
)

// refusalRows are the injection payloads, minus those the path allow-list
// (RFC 3986 pchars) accepts on purpose (see literalPaths). pier has no URL
// or header annotation: the URL and header rows go to its one free-form
// string annotation, pier.dev/load-balancer.
var refusalRows = []refusalRow{
	{id: "newline", targets: []target{pathTarget}, payloads: []string{"/a\n    http-request return status 200 string pwned\n#"}},
	{id: "quote", targets: []target{pathTarget}, payloads: []string{"/a'\n  acl x always_true '", "/a\"b", "/a'b"}},
	{id: "control-byte", targets: []target{pathTarget}, payloads: []string{"/a\r", "/a\r\nX: y", "/a\x00b", "/a\tb", "/a\x7f"}},
	{id: "space-or-hash", targets: []target{pathTarget}, payloads: []string{"/a b", "/a #b", "/a#b"}},
	{id: "backslash", targets: []target{pathTarget}, payloads: []string{"/a\\", "/a\\\\b", "/a\\x0a"}},
	{id: "dollar", targets: []target{pathTarget}, payloads: []string{"/${SECRET}", "/\"$PATH\""}},
	{id: "regex-char", targets: []target{pathTarget}, payloads: []string{"/(a|b)", "/a{3}"}},
	{id: "long", targets: []target{pathTarget}, payloads: []string{"/" + strings.Repeat("a", 4<<10-1),
		"/" + strings.Repeat("a", 100<<10-1), "/" + strings.Repeat("a", 1<<20-1)}},
	{id: "non-ascii", targets: []target{pathTarget}, payloads: []string{"/é", "/\u202egnp.exe", "/a\u200bb", "/\uff0fetc", "/\xff"}},
	{id: "percent-escape", targets: []target{pathTarget}, payloads: []string{"/%0a", "/%00", "/%2e%2e/", "/%zz", "/%2F"}},
	{id: "map-line", targets: []target{pathTarget}, payloads: []string{"/x\tother_backend", "/x\nvictim.example/\tattacker_backend"}},
	{id: "bad-host", targets: []target{hostTarget}, payloads: []string{"a.example\n", "A.EXAMPLE", "exa mple.com",
		"*.*.example", "bücher.example", host254, "10.0.0.1"}},
	{id: "annotation-injection", targets: []target{annotationTarget(annGroup), annotationTarget(annIP)},
		payloads: []string{"v\nhttp-request deny", "v' if TRUE #", "v\"$HOME\"", "v\\", "v#x"},
		markers:  []string{"if TRUE", "deny\n"}},
	{id: "typed-value", targets: []target{annotationTarget(annBalance), annotationTarget(annHealth)},
		payloads: []string{"GET;evil", "GETX", "true\n", "99999999999999999999", "-1s", "1h\n", " 10s"}},
	{id: "url", targets: []target{annotationTarget(annGroup)},
		payloads: []string{"http://a/\r\nX: y", "javascript:x", "http://user:pw@host/", "http://a/$HOME"},
		markers:  []string{"javascript", "user:pw"}},
	{id: "header", targets: []target{annotationTarget(annGroup)},
		payloads: []string{"X-A: b", "X\nY", "v'x", "v\r\nX-Evil: 1", "v\x00x", strings.Repeat("v", 64<<10)}},
	{id: "huge-pier-annotation", targets: []target{annotationTarget(annGroup)}, payloads: []string{oneMiB}},
}

// runRefusals runs every payload of every row as its own subtest.
func (b *bench) runRefusals(t *testing.T) {
	for _, row := range refusalRows {
		t.Run(row.id, func(t *testing.T) {
			n := 0
			for _, tg := range row.targets {
				for _, payload := range row.payloads {
					ns := fmt.Sprintf("evil-%s-%d", strings.ToLower(row.id), n)
					n++
					t.Run(subtestName(n, tg.label, payload), func(t *testing.T) {
						b.refuse(t, ns, tg, payload, row.markers)
					})
				}
			}
		})
	}
}

// refuse writes one attacker Ingress with payload at tg and checks the
// shared expected outcome of the table.
func (b *bench) refuse(t *testing.T, ns string, tg target, payload string, markers []string) {
	ing := ingress(ns, "evil", "attacker.example", "/ok")
	a := &attack{ns: ns}
	tg.set(ing, payload)
	want := payload
	if !utf8.ValidString(payload) {
		// JSON cannot carry invalid UTF-8; the raw bytes are spliced in
		// and the manifest decoder turns each into U+FFFD, as the API
		// server's would. The raw byte is tested in translate_test.go.
		tg.set(ing, rawPlaceholder)
		a.raw, want = payload, strings.ToValidUTF8(payload, "\uFFFD")
	}
	a.objs = append([]runtime.Object{ing}, service(ns, "app", b.attackerPort)...)
	before := b.reloads()
	got := b.launch(t, a, "evil")
	if rb := tg.get(got.Ingress); rb != want {
		t.Fatalf("payload did not reach pier as written: wrote %q, want %q read, pier read %q", clip(payload), clip(want), clip(rb))
	}
	checkRefused(t, got, tg.names, payload)
	for _, pr := range got.Problems {
		t.Logf("%s %s [%s]: %s", pr.Severity, pr.Reason, pr.Field, pr.Message)
	}
	b.checkIsolated(t, before, 0, append(markersFor(payload, b.victimText), append(globalMarkers, markers...)...))
	if got, err := b.p.Ingress(ns, "evil"); err == nil {
		checkNoAddress(t, got) // again, after settle: status is written after the verdict
	}
}

// markersFor is the payload itself as a marker, unless it is too short
// to be telling or already in the victim's config.
func markersFor(payload string, victim []byte) []string {
	if len(payload) < 4 || strings.Contains(string(victim), payload) {
		return nil
	}
	return []string{payload}
}

func subtestName(n int, where, payload string) string {
	return fmt.Sprintf("%02d_%s_%q", n, where, clip(payload))
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}
