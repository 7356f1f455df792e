package gatewayfeatures

import (
	"slices"
	"testing"
)

func TestSupportedSortedAndUnique(t *testing.T) {
	got := Supported()
	if !slices.IsSorted(got) {
		t.Fatalf("not sorted: %v", got)
	}
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Fatalf("a feature twice: %v", got)
	}
	for _, core := range []string{"Gateway", "HTTPRoute", "ReferenceGrant"} {
		if !slices.Contains(got, core) {
			t.Errorf("core feature %s missing", core)
		}
	}
	got[0] = "changed"
	if Supported()[0] == "changed" {
		t.Fatal("Supported returned the list itself, not a copy")
	}
}
