package addrhold

import (
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestContested: the standby steps down only for the active node's word
// from after its own MASTER report. An active node back
// from an API outage renews its heartbeat before its reports follow; its
// old MASTER report must not fence the standby that took over meanwhile.
func TestContested(t *testing.T) {
	reported := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	split := claim{role: model.VRRPMaster, heldFor: 5 * time.Second, myReport: reported,
		peerMaster: true, peerAlive: true, peerWritten: reported.Add(time.Second)}
	if !split.contested() {
		t.Fatalf("%+v: a split brain, not contested", split)
	}
	for _, tc := range []struct {
		name   string
		change func(*claim)
	}{
		{"the peer's reports written only up to before this node's MASTER report (back from an outage)",
			func(c *claim) { c.peerWritten = reported.Add(-time.Millisecond) }},
		{"the peer's reports written up to exactly this node's report", func(c *claim) { c.peerWritten = reported }},
		{"no word from the peer on its reports (an agent that predates it)", func(c *claim) { c.peerWritten = time.Time{} }},
		{"the peer's heartbeat expired", func(c *claim) { c.peerAlive = false }},
		{"the peer does not say MASTER", func(c *claim) { c.peerMaster = false }},
		{"this node's MASTER report never reached the store", func(c *claim) { c.myReport = time.Time{} }},
		{"this node is BACKUP", func(c *claim) { c.role = model.VRRPBackup }},
		{"this node is MASTER for less than the grace", func(c *claim) { c.heldFor = fenceGrace - time.Millisecond }},
	} {
		c := split
		tc.change(&c)
		if c.contested() {
			t.Errorf("%s: %+v contested, want not", tc.name, c)
		}
	}
}
