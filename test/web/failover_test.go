package web

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/store/storetest"
	"pier.dev/pier/internal/web"
)

// TestFailoverHistoryPage renders the detail page of a load balancer on
// a pair that failed over, in Chromium. pier run has one node and no
// VRRP, so this page is served by the web handler over a real store
// holding the reports two agents would write (node-a's HAProxy dies,
// node-b takes the addresses, node-a comes back as BACKUP); the store
// summarises them into the holder and its history, as it does for
// agents. It writes the screenshot docs/img/web-failover.png comes from.
func TestFailoverHistoryPage(t *testing.T) {
	ctx := newBrowser(t)
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lb := storetest.Sample("3f1c2a9e-5b7d-4c11-9e2f-8a6b4c3d2e10")
	lb.Name, lb.Sources[0].Namespace, lb.Sources[0].Name = "shop/storefront", "shop", "storefront"
	lb.Listeners[0].Policies[0].Source = lb.Sources[0]
	lb.Pools[0].Members = []model.Member{{Address: "10.1.0.5", Port: 8080, Weight: 1, Target: "storefront-7d9f-a"},
		{Address: "10.1.0.6", Port: 8080, Weight: 1, Target: "storefront-7d9f-b"}, {Address: "10.1.0.7", Port: 8080, Weight: 1, Target: "storefront-7d9f-c"}}
	at := time.Date(2026, 11, 24, 3, 12, 0, 0, time.UTC)
	lb.CreatedAt = at.Add(-72 * time.Hour)
	bg := context.Background()
	if err := st.PutSpec(bg, lb); err != nil {
		t.Fatal(err)
	}
	for _, r := range []model.NodeStatus{
		{Node: "node-a", VRRP: model.VRRPMaster, Reloads: 1, RuntimeUpdates: 4, MembersUp: 3, Members: 3, UpdatedAt: at},
		{Node: "node-b", VRRP: model.VRRPBackup, Reloads: 1, RuntimeUpdates: 4, MembersUp: 3, Members: 3, UpdatedAt: at},
		{Node: "node-a", VRRP: model.VRRPFault, Reloads: 1, RuntimeUpdates: 4, MembersUp: 0, Members: 3, UpdatedAt: at.Add(41 * time.Minute)},
		{Node: "node-b", VRRP: model.VRRPMaster, Reloads: 1, RuntimeUpdates: 5, MembersUp: 2, Members: 3, UpdatedAt: at.Add(41*time.Minute + time.Second)},
		{Node: "node-a", VRRP: model.VRRPBackup, Reloads: 2, RuntimeUpdates: 5, MembersUp: 2, Members: 3, UpdatedAt: at.Add(44 * time.Minute)},
	} {
		r.State, r.SpecHash, r.ConfigHash = model.StateActive, lb.SpecHash(), "9c41e07a55d2b3f8"
		if err := st.PutNodeStatus(bg, lb.UUID, r); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(&web.Handler{Store: st, Now: func() time.Time { return at.Add(50 * time.Minute) }})
	t.Cleanup(srv.Close)

	do(t, ctx, "open the detail page", chromedp.Navigate(srv.URL+"/ui/lb/"+lb.UUID), chromedp.WaitVisible(chromedp.CSS("table.history")))
	changes := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("table.history tr.change")).map(r => r.innerText)`)
	want := []string{"2026-11-24 03:53:01\tnone\tnode-b", "2026-11-24 03:53:00\tnode-a\tnone", "2026-11-24 03:12:00\tnone\tnode-a"}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Errorf("history rows:\n%s\nwant\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
	if h := eval[string](t, ctx, `document.getElementById("holder").innerText`); !strings.Contains(h, "held by node-b") {
		t.Errorf("holder line %q", h)
	}
	do(t, ctx, "overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#lb-rows tr.row")))
	row := eval[string](t, ctx, `document.querySelector("#lb-rows tr.row").innerText`)
	for _, want := range []string{"node-a ACTIVE BACKUP", "node-b ACTIVE MASTER", "2 / 3 up", "1 / 5"} {
		if !strings.Contains(row, want) {
			t.Errorf("overview row %q: missing %q", row, want)
		}
	}
	do(t, ctx, "back to the detail page", chromedp.Navigate(srv.URL+"/ui/lb/"+lb.UUID), chromedp.WaitVisible(chromedp.CSS("table.history")))
	screenshot(t, ctx, "failover")
}
