package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
)

// TestFirstTranslationLog: the first snapshot is summed up at info, and
// Ingresses of which none is pier's get a warning that says what makes
// one pier's; a world with an Ingress of ours gets no warning.
func TestFirstTranslationLog(t *testing.T) {
	run := func(t *testing.T, withClass bool) string {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		alloc, err := ipam.FromCIDRs("10.0.0.0/16", "")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		p := &Pipeline{Store: st, IPAM: alloc, Translate: translate.DefaultOptions(), Status: &memorySink{},
			Metrics: metrics.New(), Logger: slog.New(slog.NewTextHandler(&buf, nil))}
		p.init()
		p.index = controller.NewIndex(nil)
		p.reconciler = &controller.Reconciler{Store: st, Index: p.index, IPAM: alloc, Logger: p.Logger}
		snap := world()
		if !withClass {
			snap.IngressClasses = nil
			snap.Ingresses[0].Spec.IngressClassName = nil
		}
		if err := p.take(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	t.Run("none of ours", func(t *testing.T) {
		out := run(t, false)
		for _, want := range []string{`msg="first translation" ingresses=1 ingresses_ours=0`, "level=WARN", "none of the Ingresses is of a class pier serves", "without_class=1", "ingress_classes_of_pier=0"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("ours", func(t *testing.T) {
		out := run(t, true)
		if !strings.Contains(out, `msg="first translation" ingresses=1 ingresses_ours=1 ingresses_accepted=1 load_balancers=1`) {
			t.Errorf("no summary of the first translation:\n%s", out)
		}
		if strings.Contains(out, "level=WARN") {
			t.Errorf("a warning with an Ingress of ours:\n%s", out)
		}
	})
}
