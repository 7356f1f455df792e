package standalone

import (
	"context"
	"io"
	"log/slog"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/source"
)

// TestWebIngresses checks the web view gets every Ingress of the last
// snapshot with its published status and problems, as copies.
func TestWebIngresses(t *testing.T) {
	v := newView(slog.New(slog.NewTextHandler(io.Discard, nil)))
	snap := &source.Snapshot{Ingresses: []*networkingv1.Ingress{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "b"}},
	}}
	bad := model.Problem{Kind: "Ingress", Namespace: "demo", Name: "b", Severity: model.SeverityError, Reason: "InvalidHost"}
	v.Report(context.Background(), snap, []model.Problem{bad})
	addr := []networkingv1.IngressLoadBalancerIngress{{IP: "127.10.0.1"}}
	if err := v.Publish(context.Background(), snap, nil, pipeline.Published{"demo/a": addr}); err != nil {
		t.Fatal(err)
	}
	got := v.Ingresses()
	if len(got) != 2 {
		t.Fatalf("%d Ingresses, want 2", len(got))
	}
	if s := got[0].Ingress.Status.LoadBalancer.Ingress; len(s) != 1 || s[0].IP != "127.10.0.1" || len(got[0].Problems) != 0 {
		t.Errorf("demo/a: status %v, problems %v", s, got[0].Problems)
	}
	if len(got[1].Problems) != 1 || got[1].Problems[0].Reason != "InvalidHost" {
		t.Errorf("demo/b: problems %v", got[1].Problems)
	}
	got[0].Ingress.Name = "changed"
	if snap.Ingresses[0].Name != "a" {
		t.Error("the view handed out the snapshot's own Ingress")
	}
}
