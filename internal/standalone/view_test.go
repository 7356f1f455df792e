package standalone

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/status"
)

// TestPublishLogsChanges: a pass logs the objects whose addresses changed,
// in key order, and none of those it left as they were.
func TestPublishLogsChanges(t *testing.T) {
	var log bytes.Buffer
	v := newView(slog.New(slog.NewTextHandler(&log, nil)))
	ip := func(a string) []networkingv1.IngressLoadBalancerIngress {
		return []networkingv1.IngressLoadBalancerIngress{{IP: a}}
	}
	a, b, c := model.IngressRef("ns", "a"), model.IngressRef("ns", "b"), model.IngressRef("ns", "c")
	publish := func(next status.Published) []string {
		t.Helper()
		log.Reset()
		if err := v.Publish(context.Background(), nil, nil, next); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(log.String()), "\n")
	}
	if got := publish(status.Published{c: ip("10.0.0.3"), a: ip("10.0.0.1"), b: ip("10.0.0.2")}); len(got) != 3 ||
		!strings.Contains(got[0], "ingress=ns/a") || !strings.Contains(got[1], "ingress=ns/b") || !strings.Contains(got[2], "ingress=ns/c") {
		t.Fatalf("first publication logged:\n%s", strings.Join(got, "\n"))
	}
	got := publish(status.Published{a: ip("10.0.0.1"), b: ip("10.0.0.9"), c: ip("10.0.0.3")})
	if len(got) != 1 || !strings.Contains(got[0], "ingress=ns/b") || !strings.Contains(got[0], "addresses=10.0.0.9") {
		t.Fatalf("one change logged:\n%s", strings.Join(got, "\n"))
	}
	if got := v.Published(b); !status.Equal(got, ip("10.0.0.9")) {
		t.Fatalf("published %v", got)
	}
}
