package scheduler

import (
	"errors"
	"testing"

	"pier.dev/pier/internal/model"
)

func TestPlace(t *testing.T) {
	lb := func(active, standby string) *model.LoadBalancer {
		return &model.LoadBalancer{Name: "x", Provider: model.ProviderHAProxy,
			Placement: model.Placement{Active: active, Standby: standby}}
	}
	tests := []struct {
		name   string
		lb     *model.LoadBalancer
		ready  []string
		load   map[string]int
		want   model.Placement
		errMsg string
	}{
		{"new, two nodes", lb("", ""), []string{"b", "a"}, nil, model.Placement{Active: "a", Standby: "b"}, ""},
		{"new, least loaded first", lb("", ""), []string{"a", "b", "c"}, map[string]int{"a": 3, "b": 1}, model.Placement{Active: "c", Standby: "b"}, ""},
		{"kept while nodes live", lb("b", "c"), []string{"a", "b", "c"}, map[string]int{"b": 9, "c": 9}, model.Placement{Active: "b", Standby: "c"}, ""},
		{"standby lost", lb("b", "c"), []string{"a", "b"}, nil, model.Placement{Active: "b", Standby: "a"}, ""},
		{"active lost: standby promoted", lb("b", "c"), []string{"a", "c"}, nil, model.Placement{Active: "c", Standby: "a"}, ""},
		{"single node", lb("", ""), []string{"local"}, nil, model.Placement{Active: "local"}, ""},
		{"single node keeps", lb("local", "gone"), []string{"local"}, nil, model.Placement{Active: "local"}, ""},
		{"no node", lb("", ""), nil, nil, model.Placement{}, "no ready node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Place(tt.lb, tt.ready, tt.load)
			if tt.errMsg != "" {
				if err == nil {
					t.Fatalf("want error %q", tt.errMsg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Place = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestNativeProviderHasNoDriverYet(t *testing.T) {
	_, err := Place(&model.LoadBalancer{Provider: model.ProviderNative}, []string{"a"}, nil)
	if !errors.Is(err, ErrUnsupportedProvider) {
		t.Fatalf("err = %v", err)
	}
}
