package model

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)

func report(node string, role VRRPState, sec int) NodeStatus {
	return NodeStatus{Node: node, State: StateActive, VRRP: role, UpdatedAt: t0.Add(time.Duration(sec) * time.Second)}
}

// TestSummarizeHolder feeds reports one after another, as agents write
// them, and checks the holder and the history after each.
func TestSummarizeHolder(t *testing.T) {
	pair := Placement{Active: "a", Standby: "b"}
	type step struct {
		report      NodeStatus
		p           Placement
		holder      string
		historyLast *HolderChange // nil: the history did not grow
	}
	steps := []step{
		{report("a", "", 1), pair, "", nil},
		{report("a", VRRPMaster, 2), pair, "a", &HolderChange{At: t0.Add(2 * time.Second), To: "a"}},
		{report("b", VRRPBackup, 3), pair, "a", nil},
		// a's HAProxy dies: a faults first, b takes over a moment later.
		{report("a", VRRPFault, 4), pair, "", &HolderChange{At: t0.Add(4 * time.Second), From: "a"}},
		{report("b", VRRPMaster, 5), pair, "b", &HolderChange{At: t0.Add(5 * time.Second), To: "b"}},
		// a comes back as MASTER before b steps down: the active wins.
		{report("a", VRRPMaster, 6), pair, "a", &HolderChange{At: t0.Add(6 * time.Second), From: "b", To: "a"}},
		// A report from a node not placed changes nothing.
		{report("c", VRRPMaster, 7), pair, "a", nil},
		// The placement moves a away: its MASTER report is dropped.
		{report("b", VRRPMaster, 8), Placement{Active: "b", Standby: "c"}, "b", &HolderChange{At: t0.Add(8 * time.Second), From: "a", To: "b"}},
	}
	var s Status
	for i, st := range steps {
		before := len(s.History)
		s = s.WithReport(st.report, st.p)
		if s.Holder != st.holder {
			t.Fatalf("step %d: holder %q, want %q", i, s.Holder, st.holder)
		}
		if st.historyLast == nil {
			if len(s.History) != before {
				t.Fatalf("step %d: history grew: %+v", i, s.History)
			}
			continue
		}
		if len(s.History) != before+1 || s.History[len(s.History)-1] != *st.historyLast {
			t.Fatalf("step %d: history %+v, want it to end with %+v", i, s.History, *st.historyLast)
		}
	}
	if again := s.Summarize(Placement{Active: "b", Standby: "c"}); !reflect.DeepEqual(again, s) {
		t.Fatalf("summarizing a summary changed it:\n%+v\n%+v", again, s)
	}
}

// TestHistoryKeepsTheLastTen flaps a pair 15 times and checks that the
// last MaxHistory changes remain, oldest first, and that a status the
// history was taken from is not changed by appending to its copy.
func TestHistoryKeepsTheLastTen(t *testing.T) {
	pair := Placement{Active: "a", Standby: "b"}
	var s Status
	var kept Status
	for i := 1; i <= 15; i++ {
		node := []string{"a", "b"}[i%2]
		s = s.WithReport(report(node, VRRPMaster, i), pair)
		s = s.WithReport(report(map[string]string{"a": "b", "b": "a"}[node], VRRPBackup, i), pair)
		if i == 12 {
			kept = s
		}
	}
	if len(s.History) != MaxHistory {
		t.Fatalf("%d entries, want %d: %+v", len(s.History), MaxHistory, s.History)
	}
	for i, c := range s.History {
		want := t0.Add(time.Duration(6+i) * time.Second)
		if !c.At.Equal(want) || c.To == c.From {
			t.Errorf("entry %d: %+v, want a change at %s", i, c, want)
		}
	}
	if got := kept.History[len(kept.History)-1].At; !got.Equal(t0.Add(12 * time.Second)) {
		t.Fatalf("a later append changed an earlier status: its last entry is at %s", got)
	}
}

// TestSummarizeKeepsHistoryWithoutVRRP: pier run has no VRRP; reports
// never name a holder and the history stays empty.
func TestSummarizeKeepsHistoryWithoutVRRP(t *testing.T) {
	var s Status
	for i := range 3 {
		s = s.WithReport(NodeStatus{Node: "local", State: StateActive, Reloads: uint64(i), UpdatedAt: t0}, Placement{Active: "local"})
	}
	if s.Holder != "" || s.History != nil {
		t.Fatalf("holder %q, history %+v", s.Holder, s.History)
	}
	if r, _ := s.Report("local"); r.Reloads != 2 {
		t.Fatalf("report %+v", r)
	}
}
