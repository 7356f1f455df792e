package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
	"pier.dev/pier/internal/web"
)

// webServer serves the web view of n load balancers: ManyIngresses(n) translated, each load
// balancer with a VIP, a FIP, an active and a standby node among four, and
// a report from both, in a bolt store as `pier run` keeps it.
func webServer(tb testing.TB, n, pageSize int) *httptest.Server {
	tb.Helper()
	snap := ManyIngresses(n)
	opts := translate.DefaultOptions()
	opts.Members.AllowLoopback = true
	res := translate.Ingresses(snap, opts)
	st, err := bolt.Open(filepath.Join(tb.TempDir(), "pier.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	ctx := context.Background()
	nodes := []string{"node-a", "node-b", "node-c", "node-d"}
	for i, lb := range res.LoadBalancers {
		lb.VIP, lb.FIP = vip(i), "127.20."+vip(i)[len("127.10."):]
		lb.Placement = model.Placement{Active: nodes[i%4], Standby: nodes[(i+1)%4]}
		lb.CreatedAt = Epoch.Add(time.Duration(i) * time.Second)
		if err := st.PutSpec(ctx, lb); err != nil {
			tb.Fatal(err)
		}
		for _, node := range []string{lb.Placement.Active, lb.Placement.Standby} {
			r := model.NodeStatus{Node: node, State: model.StateActive, SpecHash: lb.SpecHash(), ConfigHash: lb.SpecHash()[:32], UpdatedAt: Epoch}
			if err := st.PutNodeStatus(ctx, lb.UUID, r); err != nil {
				tb.Fatal(err)
			}
		}
	}
	var ings webIngresses
	problems := map[string][]model.Problem{}
	for _, p := range res.Problems {
		problems[p.Namespace+"/"+p.Name] = append(problems[p.Namespace+"/"+p.Name], p)
	}
	for _, ing := range snap.Ingresses {
		ings = append(ings, web.IngressInfo{Ingress: ing.DeepCopy(), Problems: problems[ing.Namespace+"/"+ing.Name]})
	}
	ui := &web.Handler{Store: st, Ingresses: ings, PageSize: pageSize}
	srv := httptest.NewServer((&api.Server{Store: st, Ingresses: noIngresses{}, UI: ui}).Handler())
	tb.Cleanup(srv.Close)
	return srv
}

type webIngresses []web.IngressInfo

// Ingresses copies, as pier run's view does on every call.
func (w webIngresses) Ingresses() []web.IngressInfo {
	out := make([]web.IngressInfo, len(w))
	for i, in := range w {
		out[i] = web.IngressInfo{Ingress: in.Ingress.DeepCopy(), Problems: in.Problems}
	}
	return out
}

func fetch(tb testing.TB, url string) int {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return int(n)
}

// BenchmarkWebOverview is the server time of the overview with 1,000 load
// balancers: store read, Ingresses, filter, render, over loopback HTTP.
func BenchmarkWebOverview(b *testing.B) {
	for _, c := range []struct {
		name     string
		pageSize int
		path     string
	}{
		{"lbs=1000/page", 0, "/"},
		{"lbs=1000/one-page", 1000, "/"},
		{"lbs=1000/filtered", 0, "/ui/?namespace=team-07"},
		{"lbs=1000/detail", 0, ""},
	} {
		srv := webServer(b, 1000, c.pageSize)
		path := c.path
		if path == "" {
			path = "/ui/lb/" + firstUUID(b, srv.URL)
		}
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				n = fetch(b, srv.URL+path)
			}
			b.ReportMetric(float64(n), "html-bytes/op")
		})
	}
}

func firstUUID(tb testing.TB, base string) string {
	tb.Helper()
	lbs, err := api.ListLoadBalancers(context.Background(), base[len("http://"):])
	if err != nil || len(lbs) == 0 {
		tb.Fatalf("list: %v", err)
	}
	return lbs[0].UUID
}

// webPage is one page's figures.
type webPage struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Rows int    `json:"rows"`
	// HTMLBytes is the document; TotalBytes adds app.css and app.js, all
	// uncompressed (pier serves no compression): what a first visit
	// transfers, headers aside.
	HTMLBytes  int `json:"html_bytes"`
	TotalBytes int `json:"total_bytes"`
	// ServerMs: request sent → last byte read, over loopback, 30 requests.
	ServerMsP50 float64 `json:"server_ms_p50"`
	ServerMsP95 float64 `json:"server_ms_p95"`
	// FirstContentfulPaintMs and TransferBytes are Chromium's own
	// (Performance API), when Chromium is installed; 0 otherwise.
	FirstContentfulPaintMs float64 `json:"fcp_ms,omitempty"`
	BrowserTransferBytes   int     `json:"browser_transfer_bytes,omitempty"`
}

type webResult struct {
	LoadBalancers int       `json:"load_balancers"`
	Pages         []webPage `json:"pages"`
	Browser       string    `json:"browser"`
}

// TestWeb measures the web view with 1,000 load balancers: page weight,
// server time and, in headless Chromium, time to first contentful paint.
// Targets: the overview under 300 ms of server time and under
// 1 MB transferred. Writes web.json.
func TestWeb(t *testing.T) {
	out := outDir(t)
	const n = 1000
	res := webResult{LoadBalancers: n}
	paged, onePage := webServer(t, n, 0), webServer(t, n, n)
	assets := fetch(t, paged.URL+"/ui/static/app.css") + fetch(t, paged.URL+"/ui/static/app.js")
	pages := []struct {
		name string
		srv  *httptest.Server
		path string
		rows int
	}{
		{"overview (page 1 of 5)", paged, "/", web.DefaultPageSize},
		{"overview, all 1,000 rows on one page", onePage, "/", n},
		{"overview filtered by namespace", paged, "/ui/?namespace=team-07", n / 50},
		{"load balancer detail", paged, "/ui/lb/" + firstUUID(t, paged.URL), 0},
		{"Ingresses", paged, "/ui/ingresses", n},
	}
	ctx := webBrowser(t)
	if ctx != nil {
		res.Browser = "chromium"
		paint(t, ctx, paged.URL+"/ui/lb/"+firstUUID(t, paged.URL)) // warm up: the first navigation starts the renderer
	}
	for _, p := range pages {
		wp := webPage{Name: p.name, Path: p.path, Rows: p.rows}
		var times []float64
		for i := 0; i < 30; i++ {
			start := time.Now()
			wp.HTMLBytes = fetch(t, p.srv.URL+p.path)
			times = append(times, float64(time.Since(start).Microseconds())/1000)
		}
		sort.Float64s(times)
		wp.ServerMsP50, wp.ServerMsP95 = times[len(times)/2], times[len(times)*95/100]
		wp.TotalBytes = wp.HTMLBytes + assets
		if ctx != nil {
			wp.FirstContentfulPaintMs, wp.BrowserTransferBytes = paint(t, ctx, p.srv.URL+p.path)
		}
		t.Logf("%-40s %5d rows  html %7d B  total %7d B  server p50 %6.1f ms p95 %6.1f ms  FCP %6.1f ms  browser transfer %7d B",
			wp.Name, wp.Rows, wp.HTMLBytes, wp.TotalBytes, wp.ServerMsP50, wp.ServerMsP95, wp.FirstContentfulPaintMs, wp.BrowserTransferBytes)
		res.Pages = append(res.Pages, wp)
	}
	writeJSON(t, out, "web.json", res)
	if o := res.Pages[0]; o.ServerMsP50 > 300 || o.TotalBytes > 1<<20 {
		t.Errorf("overview: %.0f ms, %d bytes: over the target (300 ms, 1 MB)", o.ServerMsP50, o.TotalBytes)
	}
}

// webBrowser starts headless Chromium, or returns nil when it is not
// installed: the browser figures are then left out.
func webBrowser(t *testing.T) context.Context {
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Logf("chromium not installed: no first-paint figures")
		return nil
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// paint loads url in a fresh tab state (cache disabled by a unique query)
// and reads first-contentful-paint and the bytes transferred.
func paint(t *testing.T, ctx context.Context, url string) (float64, int) {
	t.Helper()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	url += fmt.Sprintf("%sbust=%d", sep, time.Now().UnixNano())
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	fcp, err := chromedp.Run(ctx, chromedp.Poll[float64](`(performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime || 0`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	bytes, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).reduce((n, e) => n + e.transferSize, 0)`))
	if err != nil {
		t.Fatal(err)
	}
	return fcp, bytes
}

// noIngresses: the JSON API's Ingress lookups are not measured.
type noIngresses struct{}

func (noIngresses) Ingress(string, string) (*networkingv1.Ingress, []model.Problem, bool) {
	return nil, nil, false
}
