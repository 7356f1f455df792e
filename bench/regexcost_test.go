package bench

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
	"pier.dev/pier/test/harness"
)

// The regular-expression paths a tenant may give (use-regex) are bounded
// by validation (encode.ParsePathRegex: repeat counts, unbounded
// repetitions, the ways the bounded part can match) and, for what that
// cannot bound, by PCRE2's match limit on every expression; a load
// balancer takes at most --max-regex-paths-per-load-balancer of them.
// TestRegexCost measures what that leaves a tenant: its load balancer
// at the cap with the costliest shape validation accepts, requests made
// to work every expression to its limit, and a neighbour on the same
// HAProxy process meanwhile.

const (
	regexPaths    = 100 // --max-regex-paths-per-load-balancer's default
	regexEvilHost = "evil.bench.example"
	regexGoodHost = "victim.bench.example"
	// regexWorst is the costliest shape validation accepts: 2^10 ways
	// for the bounded part (at MaxPathRegexPaths) times five overlapping
	// unbounded repetitions (MaxPathRegexUnbounded is 6), ending in a
	// literal the request never has, so every way is tried.
	regexWorst = "/(a?){10}a{10}.*.*.*.*.*z%d"
	// regexRun is the run of "a" a request's path starts with: long
	// enough that the unbounded repetitions, not the text, set the work.
	regexRun = 60
)

// regexSnapshot is one load balancer (a group) of two Ingresses: the
// tenant's, on regexEvilHost, with regexPaths paths, regular expressions
// of regexWorst's shape when regex, else plain prefixes; and the
// neighbour's, Prefix / on regexGoodHost. Both go to Service "target".
func regexSnapshot(regex bool, targetPort int32) *source.Snapshot {
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{IngressClass()}}
	const ns = "bench"
	var paths []networkingv1.HTTPIngressPath
	for i := range regexPaths {
		p := fmt.Sprintf("/p%d", i)
		if regex {
			p = fmt.Sprintf(regexWorst, i)
		}
		paths = append(paths, Prefix(p, DataPlaneTarget))
	}
	evil := Ingress(ns, "evil", 1, Rule(regexEvilHost, paths...))
	evil.Annotations = map[string]string{annotation.LoadBalancer: "shared"}
	if regex {
		evil.Annotations[annotation.NginxPrefix+"use-regex"] = "true"
	}
	good := Ingress(ns, "victim", 0, Rule(regexGoodHost, Prefix("/", DataPlaneTarget)))
	good.Annotations = map[string]string{annotation.LoadBalancer: "shared"}
	snap.Ingresses = []*networkingv1.Ingress{evil, good}
	svc, es := Backend(ns, DataPlaneTarget, targetPort, "127.0.0.1")
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	return snap
}

// regexPierConfig is pier's configuration of regexSnapshot on port.
func regexPierConfig(t *testing.T, regex bool, targetPort, port int, dir string) []byte {
	t.Helper()
	opts := translate.DefaultOptions()
	opts.Members.AllowLoopback = true
	opts.HTTPPort = port
	res := translate.Ingresses(regexSnapshot(regex, int32(targetPort)), opts)
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("regex fixture: %d load balancers, problems %v", len(res.LoadBalancers), res.Problems)
	}
	for _, p := range res.Problems {
		if p.Severity == model.SeverityError {
			t.Fatalf("regex fixture refused: %+v", p)
		}
	}
	lb := res.LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	conf, err := render.Config(lb, render.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeMaps(lb, dir); err != nil {
		t.Fatal(err)
	}
	if regex {
		// The expressions go into a map_reg file beside the config.
		maps, _ := filepath.Glob(filepath.Join(dir, "*.map"))
		n := 0
		for _, m := range maps {
			b, _ := os.ReadFile(m)
			n += strings.Count(string(b), "LIMIT_MATCH")
		}
		if n != regexPaths {
			t.Fatalf("pier's maps hold %d match-limited expressions, want %d: the run would measure something else", n, regexPaths)
		}
	}
	return conf
}

// regexReference is the hand-written configuration doing the same: one
// frontend, the tenant's expressions in one path_reg ACL read from a
// file, with pier's match limit when limited (an operator who knows the
// risk), without it as most hand-written ones are.
func regexReference(t *testing.T, limited bool, targetPort, port int, dir string) []byte {
	t.Helper()
	var patterns strings.Builder
	for i := range regexPaths {
		r, err := encode.ParsePathRegex(fmt.Sprintf(regexWorst, i))
		if err != nil {
			t.Fatal(err)
		}
		p := r.String()
		if !limited {
			p = p[strings.Index(p, ")")+1:]
		}
		patterns.WriteString(p + "\n")
	}
	file := filepath.Join(dir, "evil.regex")
	if err := os.WriteFile(file, []byte(patterns.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Appendf(nil, "global\n    maxconn 4096\n\n%s\nfrontend fe\n    bind 127.0.0.1:%d\n"+
		"    acl evil hdr(host),field(1,:) -i %s\n    acl good hdr(host),field(1,:) -i %s\n"+
		"    use_backend be if evil { path_reg -f %s }\n    use_backend be if good\n\nbackend be\n    server s 127.0.0.1:%d\n",
		referenceDefaults, port, regexEvilHost, regexGoodHost, file, targetPort)
}

// regexAttackPath is a path that every expression of regexWorst's shape
// works on to its limit, with a random tail that defeats HAProxy's
// pattern cache.
func regexAttackPath() string {
	tail := make([]byte, 6)
	_, _ = rand.Read(tail)
	return "/" + strings.Repeat("a", regexRun) + "-" + hex.EncodeToString(tail)
}

// regexLatencies sends n requests one after the other on one keep-alive
// connection and returns their durations, sorted.
func regexLatencies(port int, host string, path func() string, n int) ([]time.Duration, error) {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer c.CloseIdleConnections()
	var out []time.Duration
	for range n {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+path(), nil)
		if err != nil {
			return nil, err
		}
		req.Host = host
		began := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, time.Since(began))
	}
	slices.Sort(out)
	return out, nil
}

func pct(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	return float64(d[min(len(d)-1, int(float64(len(d))*p))].Microseconds()) / 1000
}

// regexRound is one variant's figures in one round, in ms.
type regexRound struct {
	Round          int     `json:"round"`
	Variant        string  `json:"variant"`
	AttackP50      float64 `json:"attack_p50_ms"`
	AttackP99      float64 `json:"attack_p99_ms"`
	VictimQuietP99 float64 `json:"victim_quiet_p99_ms"`
	VictimFloodP50 float64 `json:"victim_under_attack_p50_ms"`
	VictimFloodP99 float64 `json:"victim_under_attack_p99_ms"`
	FloodRequests  int     `json:"attack_requests_during_flood"`
	Failed         string  `json:"failed,omitempty"` // the variant stopped answering
}

// TestRegexCost: per variant and round, the latency of requests crafted
// against the tenant's expressions, and a neighbour's latency on the same
// HAProxy process alone and while the tenant sends such requests from
// regexFlooders connections at once.
func TestRegexCost(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy")
	rounds, samples, flood := 3, 300, 3*time.Second
	if quick() {
		rounds, samples, flood = 1, 30, time.Second
	}
	const flooders = 4
	root := harness.ShortTempDir(t)
	target := startOKBackend(t, root, 0)
	variants := map[string]int{} // name → port
	var order []string
	add := func(name string, conf func(port int, dir string) []byte) {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		port := harness.FreePort(t)
		startConfig(t, dir, conf(port, dir), port)
		variants[name] = port
		order = append(order, name)
	}
	add("pier-regex", func(port int, dir string) []byte { return regexPierConfig(t, true, target, port, dir) })
	add("pier-prefix", func(port int, dir string) []byte { return regexPierConfig(t, false, target, port, dir) })
	add("reference-limited", func(port int, dir string) []byte { return regexReference(t, true, target, port, dir) })
	// The reference without a match limit, a handful of requests: each
	// may take PCRE2's default limit of ten million steps per expression.
	add("reference-unlimited", func(port int, dir string) []byte { return regexReference(t, false, target, port, dir) })

	plain := func() string { return "/" }
	var runs []regexRound
	dead := map[string]string{} // variant → the error that ended it
	for round := 1; round <= rounds; round++ {
		k := round % len(order)
		for _, name := range append(order[k:], order[:k]...) {
			port := variants[name]
			n := samples
			if name == "reference-unlimited" {
				n = 3
			}
			if dead[name] != "" {
				continue
			}
			attack, err := regexLatencies(port, regexEvilHost, regexAttackPath, n)
			if err != nil && name == "reference-unlimited" {
				// What the match limit is for: one request can stall the
				// process until its watchdog kills it.
				dead[name] = err.Error()
				runs = append(runs, regexRound{Round: round, Variant: name, Failed: err.Error()})
				t.Logf("round %d %-20s the first attack request failed: %v", round, name, err)
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			quiet, err := regexLatencies(port, regexGoodHost, plain, samples)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			r := regexRound{Round: round, Variant: name, AttackP50: pct(attack, 0.5), AttackP99: pct(attack, 0.99),
				VictimQuietP99: pct(quiet, 0.99)}
			if name != "reference-unlimited" {
				var wg sync.WaitGroup
				var mu sync.Mutex
				stop := time.Now().Add(flood)
				for range flooders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for time.Now().Before(stop) {
							d, err := regexLatencies(port, regexEvilHost, regexAttackPath, 10)
							if err != nil {
								return
							}
							mu.Lock()
							r.FloodRequests += len(d)
							mu.Unlock()
						}
					}()
				}
				var victim []time.Duration
				for time.Now().Before(stop) {
					d, err := regexLatencies(port, regexGoodHost, plain, 20)
					if err != nil {
						t.Fatalf("%s: victim under attack: %v", name, err)
					}
					victim = append(victim, d...)
				}
				wg.Wait()
				slices.Sort(victim)
				r.VictimFloodP50, r.VictimFloodP99 = pct(victim, 0.5), pct(victim, 0.99)
			}
			t.Logf("round %d %-20s attack p50 %8.3f ms p99 %8.3f ms; victim p99 alone %6.3f ms, under attack p50 %6.3f p99 %6.3f ms (%d attack requests)",
				round, name, r.AttackP50, r.AttackP99, r.VictimQuietP99, r.VictimFloodP50, r.VictimFloodP99, r.FloodRequests)
			runs = append(runs, r)
		}
	}
	md := regexMarkdown(runs, order, rounds, samples, flood, flooders)
	t.Logf("\n%s", md)
	writeJSON(t, out, "regexcost.json", map[string]any{"runs": runs, "paths": regexPaths, "shape": regexWorst,
		"attack_path": "/" + strings.Repeat("a", regexRun) + "-<12 random hex>", "flooders": flooders,
		"flood_s": flood.Seconds(), "samples": samples, "load": loadAvg()})
	if err := os.WriteFile(filepath.Join(out, "regexcost.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// regexMarkdown is the table of medians over rounds, with the spread.
func regexMarkdown(runs []regexRound, order []string, rounds, samples int, flood time.Duration, flooders int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d paths of `%s` on one load balancer; requests to `/%s…` plus a random tail; "+
		"%d rounds, %d requests each, the neighbour measured alone and while %d connections attack for %s; medians (min–max over rounds), ms\n\n",
		regexPaths, regexWorst, strings.Repeat("a", 3), rounds, samples, flooders, flood)
	b.WriteString("| variant | attack request p50 | attack p99 | neighbour p99 alone | neighbour p50 under attack | neighbour p99 under attack |\n|---|---:|---:|---:|---:|---:|\n")
	for _, name := range order {
		var f [5][]float64
		failed := ""
		for _, r := range runs {
			if r.Variant == name && r.Failed != "" {
				failed = r.Failed
			}
			if r.Variant == name && r.Failed == "" {
				for i, v := range []float64{r.AttackP50, r.AttackP99, r.VictimQuietP99, r.VictimFloodP50, r.VictimFloodP99} {
					f[i] = append(f[i], v)
				}
			}
		}
		if len(f[0]) == 0 {
			fmt.Fprintf(&b, "| %s | failed: %s | | | | |\n", name, failed)
			continue
		}
		fmt.Fprintf(&b, "| %s |", name)
		for i, vs := range f {
			slices.Sort(vs)
			if name == "reference-unlimited" && i >= 3 {
				b.WriteString(" – |")
				continue
			}
			fmt.Fprintf(&b, " %.3f (%.3f–%.3f) |", vs[len(vs)/2], vs[0], vs[len(vs)-1])
		}
		b.WriteString("\n")
	}
	return b.String()
}
