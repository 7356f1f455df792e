package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestKlogReachesSlog checks that a client-go style klog line arrives in
// pier's slog handler as a structured record, not as klog's text header.
func TestKlogReachesSlog(t *testing.T) {
	var buf bytes.Buffer
	bridgeKlog(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(klog.ClearLogger)

	klog.InfoS("lease acquired", "lease", "pier-system/pier")
	klog.ErrorS(errors.New("connection refused"), "watch failed", "resource", "ingresses")
	klog.V(4).InfoS("verbose detail", "dropped", true)
	klog.Flush()

	var got []map[string]any
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON slog record: %q: %v", line, err)
		}
		got = append(got, rec)
	}
	if len(got) != 2 {
		t.Fatalf("got %d records, want 2 (the V(4) line dropped):\n%s", len(got), buf.String())
	}
	want := []map[string]any{
		{"level": "INFO", "msg": "lease acquired", "component": "client-go", "lease": "pier-system/pier"},
		{"level": "ERROR", "msg": "watch failed", "component": "client-go", "resource": "ingresses", "err": "connection refused"},
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("record %d: %s = %v, want %v (record %v)", i, k, got[i][k], v, got[i])
			}
		}
	}
}
