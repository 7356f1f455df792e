package routerid

import (
	"errors"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		in      string
		want    Range
		wantErr bool
	}{
		{"1-255", Range{1, 255}, false},
		{"10-20", Range{10, 20}, false},
		{"7", Range{7, 7}, false},
		{"0-10", Range{}, true},
		{"5-300", Range{}, true},
		{"10-5", Range{}, true},
		{"a-b", Range{}, true},
		{"1-255;evil", Range{}, true},
		{"", Range{}, true},
		{"-5", Range{}, true},
		{"1-", Range{}, true},
		{"+1-5", Range{}, true},
		{" 1-5", Range{}, true},
		{"1-2-3", Range{}, true},
		{"0001-5", Range{}, true},
	}
	for _, tt := range tests {
		got, err := ParseRange("--vrrp-router-ids", tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func placed(active, standby string, id int) model.Placement {
	return model.Placement{Active: active, Standby: standby, RouterID: id}
}

func stored(uuid string, p model.Placement, age time.Duration) *model.LoadBalancer {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &model.LoadBalancer{UUID: uuid, Name: "ns/" + uuid, Placement: p, CreatedAt: t0.Add(-age)}
}

// step is one Assign or Release and what it must return.
type step struct {
	release bool
	uuid    string
	p       model.Placement
	want    int
	wantErr error
}

func TestAllocator(t *testing.T) {
	tests := []struct {
		name   string
		r      Range
		stored []*model.LoadBalancer
		errs   int // from Replay
		steps  []step
	}{
		{name: "lowest free, shared by a pair, reversed pair is another", r: DefaultRange, steps: []step{
			{uuid: "lb1", p: placed("a", "b", 0), want: 1},
			{uuid: "lb2", p: placed("a", "b", 0), want: 1},
			{uuid: "lb3", p: placed("b", "a", 0), want: 2},
			{uuid: "lb4", p: placed("a", "c", 0), want: 3},
		}},
		{name: "no standby: no id", r: DefaultRange, steps: []step{
			{uuid: "lb1", p: placed("a", "", 0), want: 0},
			{uuid: "lb2", p: placed("a", "b", 0), want: 1},
		}},
		{name: "replayed ids are kept and not handed out", r: DefaultRange,
			stored: []*model.LoadBalancer{stored("old1", placed("a", "b", 7), 2), stored("old2", placed("b", "a", 1), 1)},
			steps: []step{
				{uuid: "new", p: placed("c", "d", 0), want: 2},
				{uuid: "old1", p: placed("a", "b", 7), want: 7},
				{uuid: "join", p: placed("b", "a", 0), want: 1},
			}},
		{name: "released with the pair's last user", r: Range{1, 2}, steps: []step{
			{uuid: "lb1", p: placed("a", "b", 0), want: 1},
			{uuid: "lb2", p: placed("a", "b", 0), want: 1},
			{uuid: "lb3", p: placed("c", "d", 0), want: 2},
			{release: true, uuid: "lb1"},
			{uuid: "lb4", p: placed("e", "f", 0), wantErr: ErrExhausted},
			{release: true, uuid: "lb2"},
			{uuid: "lb4", p: placed("e", "f", 0), want: 1},
			{uuid: "lb5", p: placed("a", "b", 0), wantErr: ErrExhausted}, // 1 is no longer a/b's
		}},
		{name: "a load balancer that moves leaves its pair", r: Range{1, 2}, steps: []step{
			{uuid: "lb1", p: placed("a", "b", 0), want: 1},
			{uuid: "lb2", p: placed("c", "d", 0), want: 2},
			{uuid: "lb1", p: placed("a", "d", 0), wantErr: ErrExhausted},
			{uuid: "lb1", p: placed("c", "d", 0), want: 2}, // joins: frees 1
			{uuid: "lb3", p: placed("e", "f", 0), want: 1},
		}},
		{name: "exhaustion changes nothing", r: Range{5, 5}, steps: []step{
			{uuid: "lb1", p: placed("a", "b", 0), want: 5},
			{uuid: "lb2", p: placed("b", "a", 0), wantErr: ErrExhausted},
			{uuid: "lb1", p: placed("a", "b", 5), want: 5},
		}},
		{name: "a free id the load balancer carries is kept", r: DefaultRange, steps: []step{
			{uuid: "lb1", p: placed("a", "b", 9), want: 9},
			{uuid: "lb2", p: placed("c", "d", 9), want: 1},
		}},
		{name: "replay conflicts: the older wins", r: Range{1, 10},
			stored: []*model.LoadBalancer{
				stored("young-same-id", placed("c", "d", 3), 1),
				stored("old", placed("a", "b", 3), 9),
				stored("young-other-id", placed("a", "b", 4), 2),
				stored("outside", placed("e", "f", 11), 3),
				stored("single", placed("g", "", 0), 3),
			},
			errs: 3,
			steps: []step{
				{uuid: "young-other-id", p: placed("a", "b", 4), want: 3},
				{uuid: "young-same-id", p: placed("c", "d", 3), want: 1},
				{uuid: "outside", p: placed("e", "f", 11), want: 2},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.r)
			if errs := a.Replay(tt.stored); len(errs) != tt.errs {
				t.Fatalf("Replay errors %v, want %d", errs, tt.errs)
			}
			for i, s := range tt.steps {
				if s.release {
					a.Release(s.uuid)
					continue
				}
				got, err := a.Assign(s.uuid, "ns/"+s.uuid, s.p)
				if !errors.Is(err, s.wantErr) || got != s.want {
					t.Fatalf("step %d: Assign(%s, %v) = %d, %v; want %d, %v", i, s.uuid, s.p, got, err, s.want, s.wantErr)
				}
			}
		})
	}
}
