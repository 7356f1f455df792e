package metrics

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// exported is every series name pier's registry can export, with its
// labels, read from the collectors New registers (not from a list kept
// by hand): a histogram's _bucket, _sum and _count included.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := New()
	out := map[string]map[string]bool{}
	descRe := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			continue
		}
		_, histogram := c.(prometheus.Histogram)
		if _, ok := c.(*prometheus.HistogramVec); ok {
			histogram = true
		}
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			g := descRe.FindStringSubmatch(d.String())
			if g == nil {
				t.Fatalf("cannot read %s", d)
			}
			labels := map[string]bool{}
			for _, l := range strings.Split(g[2], ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels[l] = true
				}
			}
			names := []string{g[1]}
			if histogram {
				names = []string{g[1] + "_bucket", g[1] + "_sum", g[1] + "_count"}
			}
			for _, n := range names {
				out[n] = labels
			}
			if histogram {
				out[g[1]+"_bucket"] = withLabel(labels, "le")
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d metrics found: %v", len(out), out)
	}
	return out
}

func withLabel(labels map[string]bool, l string) map[string]bool {
	out := map[string]bool{l: true}
	for k := range labels {
		out[k] = true
	}
	return out
}

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

var (
	metricName = regexp.MustCompile(`\bpier_[a-z0-9_]+\b`)
	// selector is a metric name and its label matchers.
	selector = regexp.MustCompile(`\b(pier_[a-z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)\s*"`)
	byClause = regexp.MustCompile(`by \(([^)]*)\)`)
)

// TestDashboardQueriesExist: every query of the Grafana dashboard
// (deploy/grafana/pier-dashboard.json, also the chart's) names metrics
// pier exports, with labels they have, so a renamed metric or label
// breaks this test and not a panel at 3 a.m.
func TestDashboardQueriesExist(t *testing.T) {
	known := exported(t)
	b, err := os.ReadFile("../../deploy/grafana/pier-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	checked := 0
	for _, e := range exprs {
		names := metricName.FindAllString(e, -1)
		if len(names) == 0 && strings.Contains(e, "(") {
			t.Errorf("query names no pier metric: %s", e)
		}
		union := map[string]bool{}
		for _, n := range names {
			labels, ok := known[n]
			if !ok {
				t.Errorf("query uses %s, which pier does not export: %s", n, e)
				continue
			}
			checked++
			for l := range labels {
				union[l] = true
			}
		}
		for _, s := range selector.FindAllStringSubmatch(e, -1) {
			for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
				if labels, ok := known[s[1]]; ok && !labels[m[1]] {
					t.Errorf("query selects %s on label %s, which it does not have: %s", s[1], m[1], e)
				}
			}
		}
		for _, by := range byClause.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(by[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !union[l] {
					t.Errorf("query groups by %s, a label none of its metrics has: %s", l, e)
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("only %d metric uses checked", checked)
	}
}
