package badinput

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/fixture"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// HAProxy 2.6 limits a config line to 64 words (MAX_LINE_ARGS); its
// line buffer grows, so the byte bound is pier's own (render.MaxLineBytes).
const (
	haproxyMaxWords = 64
	haproxyMaxLine  = render.MaxLineBytes
)

func manyPaths(ns string, n int) []networkingv1.HTTPIngressPath {
	out := make([]networkingv1.HTTPIngressPath, n)
	for i := range out {
		out[i] = fixture.Path(fmt.Sprintf("/p%04d", i), pathPrefix, "app", 80)
	}
	return out
}

// runThousandPaths is an Ingress with 1,000 paths (the default
// --max-paths-per-ingress): served, render+reload timed from pier's own
// log, HAProxy's line limits respected. One path more is refused.
func (b *bench) runThousandPaths(t *testing.T) {
	t.Run("1000_paths", func(t *testing.T) {
		ns := "evil-paths-0"
		ing, a := b.attacker(ns)
		ing.Spec.Rules[0].HTTP.Paths = manyPaths(ns, 1000)
		before := b.reloads()
		applyBefore := b.p.Metric("pier_apply_duration_seconds_sum")
		written := time.Now()
		_, vip := b.launchServed(t, a, "evil")
		took := time.Since(written)
		seen, running := b.applyTimes(t, written, ns+"/evil")
		apply := b.p.Metric("pier_apply_duration_seconds_sum") - applyBefore
		t.Logf("1,000 paths: file written → served %s; pier log: manifests read → haproxy running %s; agent render+check+start %.3fs",
			took.Round(time.Millisecond), running.Sub(seen).Round(time.Millisecond), apply)
		if running.IsZero() || running.Sub(seen) > 10*time.Second || took > 10*time.Second {
			t.Errorf("render+reload of 1,000 paths took %s (log) / %s (test), want < 10s", running.Sub(seen), took)
		}
		b.expectRoute(t, vip, "attacker.example", "/p0000", attackerEcho)
		b.expectRoute(t, vip, "attacker.example", "/p0999/x", attackerEcho)
		b.expectRoute(t, vip, "attacker.example", "/p1000", "404")
		for _, dir := range b.otherLBDirs(t) {
			checkLineLimits(t, filepath.Join(dir, "haproxy.conf"))
		}
		b.checkIsolated(t, before, 1, servedMarkers)
	})
	t.Run("1001_paths", func(t *testing.T) {
		ns := "evil-paths-1"
		ing, a := b.attacker(ns)
		ing.Spec.Rules[0].HTTP.Paths = manyPaths(ns, 1001)
		before := b.reloads()
		got := b.launch(t, a, "evil")
		checkRefused(t, got, "more than 1000 paths", "")
		b.checkIsolated(t, before, 0, servedMarkers)
	})
}

// applyTimes finds, in pier's log, when the files source read the
// attacker's manifest and when its HAProxy was running.
func (b *bench) applyTimes(t *testing.T, after time.Time, lb string) (seen, running time.Time) {
	t.Helper()
	for _, l := range b.logLines(t) {
		switch {
		case l.Time.Before(after.Add(-time.Second)):
		case l.Msg == "manifests changed" && seen.IsZero():
			seen = l.Time
		case (l.Msg == "haproxy running" || l.Msg == "haproxy reloaded" || l.Msg == "load balancer landed without reload") && l.LB == lb && running.IsZero():
			// A load balancer starts its shard, joins it with a reload or
			// lands in the landing process first (its fold-in comes later).
			running = l.Time
		}
	}
	return seen, running
}

func checkLineLimits(t *testing.T, conf string) {
	t.Helper()
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	maxWords, maxLen := 0, 0
	for i, line := range lines {
		maxWords, maxLen = max(maxWords, len(strings.Fields(line))), max(maxLen, len(line))
		if len(strings.Fields(line)) > haproxyMaxWords || len(line) >= haproxyMaxLine {
			t.Errorf("%s:%d breaks HAProxy's line limits (%d words, %d bytes)", conf, i+1, len(strings.Fields(line)), len(line))
		}
	}
	t.Logf("%s: %d bytes, %d lines, longest %d bytes, most words %d", filepath.Base(conf), len(data), len(lines), maxLen, maxWords)
}

// TestTranslateTenThousandIngresses puts 10,000 Ingresses (the
// default --max-ingresses) through translation alone: every one accepted,
// within a time and allocation budget generous enough for a shared CI
// machine, with the figures logged.
func TestTranslateTenThousandIngresses(t *testing.T) {
	const n = 10000
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{ingressClass()}}
	for i := range n {
		ns := fmt.Sprintf("ns-%05d", i)
		ing := ingress(ns, "ing", fmt.Sprintf("h%05d.example", i), "/")
		ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, fixture.Path("/api", pathPrefix, "app", 80))
		snap.Ingresses = append(snap.Ingresses, ing)
		objs := service(ns, "app", 8000+i%1000)
		snap.Services = append(snap.Services, objs[0].(*corev1.Service))
		snap.EndpointSlices = append(snap.EndpointSlices, objs[1].(*discoveryv1.EndpointSlice))
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	res := translate.Ingresses(snap, loopbackOptions())
	took := time.Since(start)
	runtime.ReadMemStats(&m1)
	alloc, allocs := m1.TotalAlloc-m0.TotalAlloc, m1.Mallocs-m0.Mallocs
	t.Logf("10,000 Ingresses (20,000 paths): translated in %s, %.1f MiB allocated in %d allocations, heap in use %.1f MiB",
		took.Round(time.Millisecond), float64(alloc)/(1<<20), allocs, float64(m1.HeapInuse)/(1<<20))
	if len(res.Accepted) != n || len(res.LoadBalancers) != n {
		t.Errorf("accepted %d Ingresses into %d load balancers, want %d", len(res.Accepted), len(res.LoadBalancers), n)
	}
	if len(res.Problems) != 0 {
		t.Errorf("%d problems, first %+v", len(res.Problems), res.Problems[0])
	}
	if took > 10*time.Second || alloc > 2<<30 {
		t.Errorf("translation took %s and allocated %d MiB: want < 10s and < 2 GiB", took, alloc>>20)
	}
	// One Ingress past the cap is refused, not silently dropped.
	snap.Ingresses = append(snap.Ingresses, ingress("zz-late", "ing", "late.example", "/"))
	if res := translate.Ingresses(snap, loopbackOptions()); len(res.Accepted) != n ||
		findProblem(res.Problems, "Error", "TooManyIngresses") == nil {
		t.Errorf("Ingress 10,001: accepted %d, problems %s", len(res.Accepted), problemList(res.Problems))
	}
}

// loopbackOptions are the defaults with loopback endpoints admitted, as
// pier run admits them: the backends of these tests listen on 127.0.0.1.
func loopbackOptions() translate.Options {
	opts := translate.DefaultOptions()
	opts.Members.AllowLoopback = true
	return opts
}
