package pipeline

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/status"
)

// An Ingress and a Service with the same namespace and name are two
// objects: their problems and status are kept apart.
func TestSameNameDifferentKinds(t *testing.T) {
	var logs bytes.Buffer
	book := NewProblemBook(slog.New(slog.NewTextHandler(&logs, nil)))
	ing := model.Problem{Kind: model.KindIngress, Namespace: "ns", Name: "web", Severity: model.SeverityError, Reason: "BadPath", Message: "m1"}
	svc := model.Problem{Kind: model.KindService, Namespace: "ns", Name: "web", Severity: model.SeverityError, Reason: "BadPath", Message: "m2"}

	if fresh := book.Update([]model.Problem{ing, svc}); len(fresh) != 2 {
		t.Fatalf("fresh = %+v, want both", fresh)
	}
	if got := book.Of(model.IngressRef("ns", "web")); len(got) != 1 || got[0].Message != "m1" {
		t.Errorf("Ingress ns/web problems = %+v", got)
	}
	if got := book.Of(model.ObjectRef{Kind: model.KindService, Namespace: "ns", Name: "web"}); len(got) != 1 || got[0].Message != "m2" {
		t.Errorf("Service ns/web problems = %+v", got)
	}
	// Reported once: the same problems again are not new.
	if fresh := book.Update([]model.Problem{ing, svc}); len(fresh) != 0 {
		t.Errorf("repeated problems reported again: %+v", fresh)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 2 {
		t.Errorf("%d error lines, want 2:\n%s", n, logs.String())
	}
	// The message names the kind, so a refused Service is not logged as
	// a refused Ingress.
	for _, want := range []string{`msg="ingress refused" ingress=ns/web`, `msg="service refused" object="Service ns/web"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q in the log:\n%s", want, logs.String())
		}
	}
	// A new message for one of them is new; the other stays reported.
	ing.Message = "m3"
	if fresh := book.Update([]model.Problem{ing, svc}); len(fresh) != 1 || fresh[0].Kind != model.KindIngress {
		t.Errorf("fresh after a change = %+v", fresh)
	}

	published := status.Published{
		model.IngressRef("ns", "web"):                           {{IP: "10.0.0.1"}},
		{Kind: model.KindService, Namespace: "ns", Name: "web"}: {{IP: "10.0.0.2"}},
	}
	if keys := status.Keys(published); len(keys) != 2 || keys[0].Kind != model.KindIngress || keys[1].Kind != model.KindService {
		t.Errorf("status keys = %v", keys)
	}
}
