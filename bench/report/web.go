package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// WebResult is web.json as bench/web_test.go writes it: the web view's
// pages with 1,000 load balancers.
type WebResult struct {
	LoadBalancers int    `json:"load_balancers"`
	Browser       string `json:"browser"`
	Pages         []struct {
		Name         string  `json:"name"`
		Rows         int     `json:"rows"`
		HTMLBytes    float64 `json:"html_bytes"`
		TotalBytes   float64 `json:"total_bytes"`
		ServerMsP50  float64 `json:"server_ms_p50"`
		ServerMsP95  float64 `json:"server_ms_p95"`
		FCPMs        float64 `json:"fcp_ms"`
		BrowserBytes float64 `json:"browser_transfer_bytes"`
	} `json:"pages"`
}

func webResult(b []byte) (*WebResult, error) {
	var w WebResult
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

func webMarkdown(w *WebResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n## 5. Web view: %s load balancers\n\n", thousands(float64(w.LoadBalancers)))
	p("Served by the real handler over loopback from a bolt store; server time is request sent → last byte read (30 requests); bytes are uncompressed, total adds app.css and app.js. First contentful paint is Chromium's own (%s). Targets: the overview under 300 ms of server time and under 1 MB.\n\n", orNone(w.Browser))
	p("| page | rows | HTML | total | server p50 | server p95 | first paint |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, pg := range w.Pages {
		p("| %s | %s | %s | **%s** | **%.0f ms** | %.0f ms | %.0f ms |\n", pg.Name, thousands(float64(pg.Rows)),
			bytesIEC(pg.HTMLBytes), bytesIEC(pg.TotalBytes), pg.ServerMsP50, pg.ServerMsP95, pg.FCPMs)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "not installed: no paint figures"
	}
	return s
}
