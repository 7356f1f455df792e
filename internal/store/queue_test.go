package store

import (
	"strings"
	"testing"
)

func TestQueueCoalescing(t *testing.T) {
	type op struct{ typ, uuid, version string }
	put := func(u, v string) op { return op{"PUT", u, v} }
	del := func(u, v string) op { return op{"DELETE", u, v} }
	tests := []struct {
		name string
		in   []op
		want string
	}{
		{"puts collapse", []op{put("x", "1"), put("x", "2")}, "PUT x 2"},
		{"delete replaces put", []op{put("x", "1"), del("x", "1")}, "DELETE x 1"},
		{"put after delete is kept apart", []op{del("x", "1"), put("x", "2")}, "DELETE x 1, PUT x 2"},
		{"put after delete collapses with puts", []op{del("x", "1"), put("x", "2"), put("x", "3")}, "DELETE x 1, PUT x 3"},
		{"recreated and deleted again", []op{del("x", "1"), put("x", "2"), del("x", "2")}, "DELETE x 2"},
		{"position of first change kept", []op{put("x", "1"), put("y", "1"), put("x", "2")}, "PUT x 2, PUT y 1"},
		{"delete and put stay together", []op{del("x", "1"), put("y", "1"), put("x", "2")}, "DELETE x 1, PUT x 2, PUT y 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue[string]()
			for _, o := range tc.in {
				q.Push(o.uuid, EventType(o.typ), o.uuid+" "+o.version)
			}
			var got []string
			for typ, v, ok := q.Pop(); ok; typ, v, ok = q.Pop() {
				got = append(got, string(typ)+" "+v)
			}
			if s := strings.Join(got, ", "); s != tc.want {
				t.Fatalf("delivered %q, want %q", s, tc.want)
			}
			if len(q.pending) != 0 || len(q.order) != 0 {
				t.Fatalf("left behind: pending %v, order %v", q.pending, q.order)
			}
		})
	}
}
