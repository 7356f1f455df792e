package source

import (
	"slices"
	"testing"
)

// TestDiffering: what two lists share at both ends is dropped, and only
// that: the rest is what a comparison must still look at.
func TestDiffering(t *testing.T) {
	for _, tc := range []struct {
		name               string
		prev, next         []string
		wantPrev, wantNext []string
	}{
		{"same", []string{"a", "b", "c"}, []string{"a", "b", "c"}, []string{}, []string{}},
		{"one changed in the middle", []string{"a", "b", "c"}, []string{"a", "B", "c"}, []string{"b"}, []string{"B"}},
		{"first changed", []string{"a", "b", "c"}, []string{"A", "b", "c"}, []string{"a"}, []string{"A"}},
		{"last changed", []string{"a", "b", "c"}, []string{"a", "b", "C"}, []string{"c"}, []string{"C"}},
		{"one added last", []string{"a", "b"}, []string{"a", "b", "c"}, []string{}, []string{"c"}},
		{"one added first", []string{"b", "c"}, []string{"a", "b", "c"}, []string{}, []string{"a"}},
		{"one removed in the middle", []string{"a", "b", "c"}, []string{"a", "c"}, []string{"b"}, []string{}},
		{"two swapped", []string{"a", "b", "c", "d"}, []string{"a", "c", "b", "d"}, []string{"b", "c"}, []string{"c", "b"}},
		{"empty before", nil, []string{"a"}, []string{}, []string{"a"}},
		{"all different", []string{"a", "b"}, []string{"c", "d"}, []string{"a", "b"}, []string{"c", "d"}},
	} {
		p, n := Differing(tc.prev, tc.next)
		if !slices.Equal(p, tc.wantPrev) || !slices.Equal(n, tc.wantNext) {
			t.Errorf("%s: Differing = %v, %v; want %v, %v", tc.name, p, n, tc.wantPrev, tc.wantNext)
		}
	}
}
