package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// browserHeaders are the request headers of a current desktop browser
// visiting a page with a session (about 900 bytes with wrk's Host), the
// size the header guard scans on a real request.
var browserHeaders = []string{
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
	"Accept-Language: en-GB,en-US;q=0.9,en;q=0.8,de;q=0.7",
	"Accept-Encoding: gzip, deflate, br, zstd",
	"Cache-Control: max-age=0",
	"Sec-Ch-Ua: \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"",
	"Sec-Ch-Ua-Mobile: ?0",
	"Sec-Ch-Ua-Platform: \"Linux\"",
	"Sec-Fetch-Dest: document",
	"Sec-Fetch-Mode: navigate",
	"Sec-Fetch-Site: same-origin",
	"Sec-Fetch-User: ?1",
	"Upgrade-Insecure-Requests: 1",
	"Referer: https://shop.example/catalog/shoes?size=42&colour=blue",
	"Cookie: session=7f3c2a9e5b1d4c8fa0e6b2d9c4f1a3e8; _ga=GA1.1.1234567890.1732600000; consent=analytics%3Dno%26ads%3Dno; cart=3",
}

// guards are the header guard's two forms: the hex-encoded scan pier
// used until 2026-11-26, and the one character class over the raw
// header block it uses now, against none.
var guards = []struct{ name, line string }{
	{"none", ""},
	{"hex-encoded (before)", `http-request deny deny_status 400 if { req.hdrs,hex -m reg ^(?:[0-9A-F]{2})*?(?:0[0-8BCEF]|1[0-9A-F]|7F) }`},
	{"character class (now)", `http-request deny deny_status 400 if { req.hdrs -m reg '[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]' }`},
}

// TestHeaderGuard prices the header guard (keep only what earns its
// cost) on browser-sized headers: three HAProxy processes that answer
// 200 themselves (no backend, so the guard is a visible share of the
// work), interleaved rounds, CPU per request from /proc.
func TestHeaderGuard(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy", "wrk")
	rounds, d := 5, 4*time.Second
	if quick() {
		rounds, d = 1, time.Second
	}
	root := harness.ShortTempDir(t)
	insts := map[string]proxyInstance{}
	for i, g := range guards {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		port := harness.FreePort(t)
		conf := fmt.Sprintf("global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 50s\n    timeout server 50s\n"+
			"frontend f\n    bind 127.0.0.1:%d\n    %s\n    http-request return status 200 content-type text/plain string ok\n", port, g.line)
		insts[g.name] = startConfig(t, dir, []byte(conf), port)
	}
	url := func(in proxyInstance) string { return "http://127.0.0.1:" + strconv.Itoa(in.port) + "/" }
	for _, g := range guards {
		runWrkHeaders(t, url(insts[g.name]), "shop.example", browserHeaders, time.Second)
	}
	var runs []routingRun
	for round := 1; round <= rounds; round++ {
		order := slices.Clone(guards)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, g := range order {
			run := measureRun(t, insts[g.name], "/", "shop.example", browserHeaders, d)
			run.Round, run.Config = round, g.name
			t.Logf("round %d %-22s %8.0f req/s %5.2f µs CPU/req load %.2f", round, g.name, run.RPS, run.CPUPerReqU, run.LoadAvg)
			runs = append(runs, run)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| header guard | req/s | CPU/req | CPU/req over none (min–max) |\n|---|---:|---:|---:|\n")
	pick := func(name string) (rps, cpu []float64) {
		for _, r := range runs {
			if r.Config == name {
				rps, cpu = append(rps, r.RPS), append(cpu, r.CPUPerReqU)
			}
		}
		return rps, cpu
	}
	_, none := pick("none")
	for _, g := range guards {
		rps, cpu := pick(g.name)
		var extra []float64
		for i := range min(len(cpu), len(none)) {
			extra = append(extra, cpu[i]-none[i])
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.2f µs | %+.2f µs (%+.2f – %+.2f) |\n", g.name, medianOf(rps), medianOf(cpu),
			medianOf(extra), slices.Min(extra), slices.Max(extra))
	}
	t.Logf("\n%s", b.String())
	writeJSON(t, out, "header-guard.json", map[string]any{"runs": runs, "headers": browserHeaders,
		"wrk": "wrk -t2 -c50 (keep-alive), HAProxy answers 200 itself"})
	if err := os.WriteFile(filepath.Join(out, "header-guard.md"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
