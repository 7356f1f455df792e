package cluster

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// TestWebIngresses checks the controller's web view reads the leader's
// last snapshot, with problems, as copies; before any snapshot (a standby
// replica) it is nil: not known here.
func TestWebIngresses(t *testing.T) {
	e := &eventSink{}
	if got := e.Ingresses(); got != nil {
		t.Errorf("before a snapshot: %v, want nil", got)
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "a"}}
	e.snap = &source.Snapshot{Ingresses: []*networkingv1.Ingress{ing}}
	e.problems = map[string][]model.Problem{"demo/a": {{Kind: "Ingress", Namespace: "demo", Name: "a", Reason: "InvalidPath"}}}
	got := e.Ingresses()
	if len(got) != 1 || len(got[0].Problems) != 1 || got[0].Problems[0].Reason != "InvalidPath" {
		t.Fatalf("got %+v", got)
	}
	got[0].Ingress.Name = "changed"
	if ing.Name != "a" {
		t.Error("the informer's object was handed out")
	}
}
