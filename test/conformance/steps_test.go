package conformance

import (
	"bytes"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// cucumberReport is the part of godog's cucumber JSON the tests read.
type cucumberReport []struct {
	URI      string `json:"uri"`
	Elements []struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Steps []struct {
			Name   string `json:"name"`
			Result struct {
				Status string `json:"status"`
				Error  string `json:"error_message"`
			} `json:"result"`
		} `json:"steps"`
	} `json:"elements"`
}

// runFeatures runs the real feature files against c and returns the
// report, godog's status and the step statuses by step text.
func runFeatures(t *testing.T, c Cluster, opts Options) (cucumberReport, int, map[string][]string) {
	t.Helper()
	paths := RequireFeaturePaths(t)
	var out bytes.Buffer
	status := RunSuite(t.Context(), c, opts, paths, "cucumber", &out)
	var report cucumberReport
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("cucumber report: %v\n%s", err, out.String())
	}
	byText := map[string][]string{}
	for _, f := range report {
		for _, e := range f.Elements {
			for _, s := range e.Steps {
				byText[s.Name] = append(byText[s.Name], s.Result.Status)
			}
		}
	}
	return report, status, byText
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}

// Every step of the five features must match a definition: strict mode
// turns an undefined step into a failure, but only this test says which.
func TestEveryFeatureStepIsDefined(t *testing.T) {
	port := closedPort(t)
	c := &recordingCluster{httpPort: port, httpsPort: port, status: []statusAnswer{ip("127.0.0.1")}}
	opts := DefaultOptions()
	opts.PollInterval, opts.AbsentStatusTimeout, opts.ScaleSettle, opts.RequestTimeout = time.Millisecond, time.Millisecond, 0, time.Second

	report, status, byText := runFeatures(t, c, opts)
	if status == 0 {
		t.Error("suite passed with no ingress controller behind it")
	}

	scenarios := 0
	for _, f := range report {
		for _, e := range f.Elements {
			if e.Type == "scenario" {
				scenarios++
			}
		}
	}
	if scenarios != 30 {
		t.Errorf("%d scenarios, want the 30 of the upstream suite", scenarios)
	}
	for text, statuses := range byText {
		for _, s := range statuses {
			if s == "undefined" || s == "pending" || s == "ambiguous" {
				t.Errorf("step %q is %s", text, s)
			}
		}
	}

	// Setup steps pass against any cluster.
	for _, text := range []string{
		"a new random namespace",
		`a self-signed TLS secret named "conformance-tls" for the "foo.bar.com" hostname`,
		`an Ingress resource named "default-backend" with this spec:`,
		"an Ingress resource",
		"an Ingress resource in a new random namespace",
		"The Ingress status shows the IP address or FQDN where it is exposed",
		`The backend deployment "echo-service" for the ingress resource is scaled to 10`,
	} {
		statuses := byText[text]
		if len(statuses) == 0 {
			t.Errorf("step %q never ran", text)
		}
		for _, s := range statuses {
			if s != "passed" {
				t.Errorf("step %q: %s, want passed", text, s)
			}
		}
	}
	// Requests go to a closed port, so they fail rather than pass.
	for text, statuses := range byText {
		if strings.HasPrefix(text, "I send") && slices.Contains(statuses, "passed") {
			t.Errorf("step %q passed against a closed port", text)
		}
	}
	// ingress_class must fail: the fake gives every Ingress an address.
	if got := byText["The Ingress status should not contain the IP address or FQDN"]; !slices.Equal(got, []string{"failed"}) {
		t.Errorf("ingress_class check: %v, want [failed]", got)
	}

	if len(c.namespaces) != 30 || !slices.Equal(c.namespaces, c.deleted) {
		t.Errorf("namespaces created %v, deleted %v: want one per scenario, each deleted", c.namespaces, c.deleted)
	}
	if want := []string{findNamespace(c, "load-balancing") + "/load-balancing/echo-service/10"}; !slices.Equal(c.scaled, want) {
		t.Errorf("scaled %v, want %v", c.scaled, want)
	}
	checkIngressClasses(t, c)
}

// checkIngressClasses: the suite's class is filled in, an explicit one kept.
func checkIngressClasses(t *testing.T, c *recordingCluster) {
	t.Helper()
	for _, ing := range c.ingresses {
		want := IngressClass
		if ing.Name == "test-ingress-class" {
			want = "some-invalid-class-name"
		}
		if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != want {
			t.Errorf("ingress %s class %v, want %q", ing.Name, ing.Spec.IngressClassName, want)
		}
	}
}

func findNamespace(c *recordingCluster, ingress string) string {
	for _, ing := range c.ingresses {
		if ing.Name == ingress {
			return ing.Namespace
		}
	}
	return ""
}
