package pipeline

import (
	"strings"
	"testing"
)

// TestFirstTranslationLog: the first snapshot is summed up at info, and
// Ingresses of which none is pier's get a warning that says what makes
// one pier's; a world with an Ingress of ours gets no warning.
func TestFirstTranslationLog(t *testing.T) {
	t.Run("none of ours", func(t *testing.T) {
		h := newHarness(t)
		snap := world()
		snap.IngressClasses = nil
		snap.Ingresses[0].Spec.IngressClassName = nil
		h.offer(snap)
		out := h.logs.String()
		for _, want := range []string{`msg="first translation" ingresses=1 ingresses_ours=0`, "level=WARN",
			"none of the Ingresses is of a class pier serves", "without_class=1", "ingress_classes_of_pier=0"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("ours", func(t *testing.T) {
		h := newHarness(t)
		h.offer(world())
		out := h.logs.String()
		if !strings.Contains(out, `msg="first translation" ingresses=1 ingresses_ours=1 ingresses_accepted=1 load_balancers=1`) {
			t.Errorf("no summary of the first translation:\n%s", out)
		}
		if strings.Contains(out, "level=WARN") {
			t.Errorf("a warning with an Ingress of ours:\n%s", out)
		}
	})
}
