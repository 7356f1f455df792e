package nft

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/goldenfile"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got, "go test ./internal/nft")
}

var (
	vip = netip.MustParseAddr("10.98.200.1")
	fip = netip.MustParseAddr("10.98.201.1")
	ep  = func(a string, p uint16) Backend { return Backend{Addr: netip.MustParseAddr(a), Port: p} }
	wep = func(a string, p uint16, w int64) Backend {
		return Backend{Addr: netip.MustParseAddr(a), Port: p, Weight: w}
	}
)

func fixtures() map[string][]Service {
	return map[string][]Service{
		"empty": nil,
		"tcp-udp": {
			{ID: "a1", Addrs: []netip.Addr{vip, fip}, Proto: TCP, Port: 80,
				Backends: []Backend{ep("10.98.11.2", 8080), ep("10.98.10.2", 8080), ep("10.98.12.2", 8080)}},
			{ID: "a2", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 53,
				Backends: []Backend{ep("10.98.10.2", 5353)}},
		},
		"consistent": {
			{ID: "c1", Addrs: []netip.Addr{vip, fip}, Proto: TCP, Port: 80, Consistent: true,
				Backends: []Backend{ep("10.98.11.2", 8080), ep("10.98.10.2", 8080), ep("10.98.12.2", 8080)}},
		},
		// A UDPRoute of 70/30/0: the first Service's two endpoints share
		// its 70 (35 each), the other's one has 30, the third none. Then
		// one of 70/30 whose second Service has no endpoint: 3 of 10
		// flows refused.
		"weighted": {
			{ID: "w1", Addrs: []netip.Addr{vip, fip}, Proto: UDP, Port: 8080,
				Backends: []Backend{wep("10.98.10.2", 8080, 35), wep("10.98.10.3", 8080, 35), wep("10.98.11.2", 8080, 30)}},
			{ID: "w2", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 8081, Reject: 30, RejectOf: 100,
				Backends: []Backend{wep("10.98.10.2", 8080, 70)}},
			// Weights too fine for an exact table: 1,000 slots.
			{ID: "w3", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 8082,
				Backends: []Backend{wep("10.98.10.2", 8080, 999_999), wep("10.98.11.2", 8080, 1)}},
		},
		// Weights with source affinity and with a Maglev table, each with
		// a reject share under its own seed.
		"weighted-hashes": {
			{ID: "h1", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 53, SourceHash: true, Reject: 1, RejectOf: 4,
				Backends: []Backend{wep("10.98.10.2", 5353, 2), wep("10.98.11.2", 5353, 1)}},
			{ID: "h2", Addrs: []netip.Addr{fip}, Proto: UDP, Port: 53, Consistent: true, Reject: 1, RejectOf: 4,
				Backends: []Backend{wep("10.98.10.2", 5353, 2), wep("10.98.11.2", 5353, 1)}},
		},
		"no-endpoints-and-affinity": {
			{ID: "b1", Addrs: []netip.Addr{vip}, Proto: TCP, Port: 81},
			{ID: "b2", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 81},
			{ID: "b3", Addrs: []netip.Addr{fip}, Proto: TCP, Port: 443, SourceHash: true,
				Backends: []Backend{ep("10.98.10.2", 8443), ep("10.98.11.2", 8443)}},
		},
	}
}

func TestGolden(t *testing.T) {
	for name, svcs := range fixtures() {
		t.Run(name, func(t *testing.T) {
			got, running, err := Render(nil, svcs)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".nft", got)
			// Order of the input does not matter.
			rev := slices.Clone(svcs)
			slices.Reverse(rev)
			again, _, err := Render(nil, rev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, again) {
				t.Fatal("two renders of the same services differ")
			}
			// The same services again: nothing to change.
			if same, _, err := Render(running, rev); len(svcs) > 0 && (err != nil || len(same) != 0) {
				t.Fatalf("no change rendered %q, %v", same, err)
			}
		})
	}
}

// TestChanges: a sequence of changes, each rendered against what the
// previous one left running, element by element.
func TestChanges(t *testing.T) {
	steps := [][]Service{
		{{ID: "a1", Addrs: []netip.Addr{vip, fip}, Proto: TCP, Port: 80,
			Backends: []Backend{ep("10.98.10.2", 8080), ep("10.98.11.2", 8080), ep("10.98.12.2", 8080)}}},
		// One endpoint goes: the rule picks among 2, entry 2 stays.
		{{ID: "a1", Addrs: []netip.Addr{vip, fip}, Proto: TCP, Port: 80,
			Backends: []Backend{ep("10.98.10.2", 8080), ep("10.98.12.2", 8080)}}},
		// Another changes: entry 2 goes now, entry 1 changes in place; a
		// UDP service comes with no endpoint (rejected).
		{{ID: "a1", Addrs: []netip.Addr{vip, fip}, Proto: TCP, Port: 80,
			Backends: []Backend{ep("10.98.10.2", 8080), ep("10.98.13.2", 8080)}},
			{ID: "a2", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 53}},
		// The UDP service gets an endpoint, the TCP one goes.
		{{ID: "a2", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 53, Backends: []Backend{ep("10.98.10.2", 5353)}}},
	}
	var running []Service
	var all []byte
	for i, next := range steps {
		var out []byte
		var err error
		prev := running
		if i == 0 {
			prev = nil
		}
		out, running, err = Render(prev, next)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		all = append(all, []byte("# step "+strconv.Itoa(i)+"\n")...)
		all = append(all, out...)
	}
	golden(t, "changes.nft", all)
	if _, gone, _ := Render(running, nil); len(gone) != 0 {
		t.Fatal("removing everything left services")
	}
}

func TestRefuses(t *testing.T) {
	for name, svcs := range map[string][]Service{
		"duplicate address and port": {
			{ID: "a", Addrs: []netip.Addr{vip}, Proto: TCP, Port: 80},
			{ID: "b", Addrs: []netip.Addr{vip}, Proto: TCP, Port: 80},
		},
		"duplicate id":      {{ID: "a", Addrs: []netip.Addr{vip}, Proto: TCP, Port: 80}, {ID: "a", Addrs: []netip.Addr{fip}, Proto: TCP, Port: 80}},
		"port 0":            {{ID: "a", Addrs: []netip.Addr{vip}, Proto: TCP}},
		"backend port 0":    {{ID: "a", Addrs: []netip.Addr{vip}, Proto: TCP, Port: 80, Backends: []Backend{ep("10.98.10.2", 0)}}},
		"ipv6":              {{ID: "a", Addrs: []netip.Addr{netip.MustParseAddr("fd00::1")}, Proto: TCP, Port: 80}},
		"zero address":      {{ID: "a", Addrs: []netip.Addr{{}}, Proto: TCP, Port: 80}},
		"unknown protocol":  {{ID: "a", Addrs: []netip.Addr{vip}, Port: 80}},
		"id with a space":   {{ID: "a b", Addrs: []netip.Addr{vip}, Proto: TCP, Port: 80}},
		"id with a newline": {{ID: "a\nflush ruleset", Addrs: []netip.Addr{vip}, Proto: TCP, Port: 80}},
		"negative weight":   {{ID: "a", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 80, Backends: []Backend{wep("10.98.10.2", 80, -1)}}},
		"huge weight":       {{ID: "a", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 80, Backends: []Backend{wep("10.98.10.2", 80, MaxWeight+1)}}},
		"one backend, two weights": {{ID: "a", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 80,
			Backends: []Backend{wep("10.98.10.2", 80, 1), wep("10.98.10.2", 80, 2)}}},
		"reject every flow": {{ID: "a", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 80, Reject: 3, RejectOf: 3,
			Backends: []Backend{ep("10.98.10.2", 80)}}},
		"reject without a total": {{ID: "a", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 80, Reject: 1,
			Backends: []Backend{ep("10.98.10.2", 80)}}},
		"negative reject": {{ID: "a", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 80, Reject: -1, RejectOf: 3,
			Backends: []Backend{ep("10.98.10.2", 80)}}},
	} {
		if out, _, err := Render(nil, svcs); err == nil {
			t.Errorf("%s: rendered\n%s", name, out)
		}
	}
}

// TestOnlyOurTable: every line names our table or is inside it; the
// transaction never flushes the ruleset or another table.
func TestOnlyOurTable(t *testing.T) {
	for name, svcs := range fixtures() {
		out, _, err := Render(nil, svcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "\t") || l == "" || l == "}" {
				continue
			}
			if !strings.HasSuffix(strings.TrimSuffix(l, " {"), Table) && !strings.Contains(l, " "+Table+" ") {
				t.Errorf("%s: top-level line %q does not name %s", name, l, Table)
			}
		}
	}
}

// nftUsable skips a test that needs nft and root.
func nftUsable(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs nft and root")
	}
}

// TestParses: nft itself takes every fixture's table (check mode: the
// kernel validates the transaction, nothing is committed), the weighted
// ones' reject rules in nat chains included.
func TestParses(t *testing.T) {
	nftUsable(t)
	for name, svcs := range fixtures() {
		got, _, err := Render(nil, svcs)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("nft", "-c", "-f", "-")
		cmd.Stdin = bytes.NewReader(got)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: nft -c: %v: %s", name, err, out)
		}
	}
}

// TestWeightedChanges: a service going from even to weighted, losing a
// Service's endpoints (its share refused), to weights too fine for an
// exact table and back to even, each step rendered against the last and
// run by the real nft in a network namespace of the test's own: the
// element-by-element changes apply, and the map holds the slots Render
// says.
func TestWeightedChanges(t *testing.T) {
	w := func(r, of int64, bs ...Backend) []Service {
		return []Service{{ID: "w1", Addrs: []netip.Addr{vip}, Proto: UDP, Port: 8080, Reject: r, RejectOf: of, Backends: bs}}
	}
	steps := [][]Service{
		w(0, 0, ep("10.98.10.2", 8080), ep("10.98.10.3", 8080), ep("10.98.11.2", 8080)),
		w(0, 0, wep("10.98.10.2", 8080, 35), wep("10.98.10.3", 8080, 35), wep("10.98.11.2", 8080, 30)),
		w(30, 100, wep("10.98.10.2", 8080, 35), wep("10.98.10.3", 8080, 35)),
		w(0, 0, wep("10.98.10.2", 8080, 999_999), wep("10.98.11.2", 8080, 1)),
		w(0, 0, ep("10.98.10.2", 8080)),
	}
	var all []byte
	var outs [][]byte
	var running []Service
	for i, next := range steps {
		prev := running
		if i == 0 {
			prev = nil
		}
		out, now, err := Render(prev, next)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		running = now
		outs = append(outs, out)
		all = append(all, []byte("# step "+strconv.Itoa(i)+" ("+strconv.Itoa(now[0].Slots)+" slots)\n")...)
		all = append(all, out...)
	}
	golden(t, "weighted-changes.nft", all)

	nftUsable(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip")
	}
	ns := "pier-nftw-" + strconv.Itoa(os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	running = nil
	for i, out := range outs {
		cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		cmd.Stdin = bytes.NewReader(out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("step %d: nft -f: %v: %s\n%s", i, err, msg, out)
		}
		prev := running
		if i == 0 {
			prev = nil
		}
		_, running, _ = Render(prev, steps[i])
		list, err := exec.Command("ip", "netns", "exec", ns, "nft", "-j", "list", "map", "inet", "pier_native", "eps_w1").Output()
		if err != nil {
			t.Fatalf("step %d: nft list: %v", i, err)
		}
		// Every entry a rule can pick is there (and those past it that
		// linger one change).
		if got := strings.Count(string(list), `"concat"`); got != running[0].Slots {
			t.Errorf("step %d: the map holds %d entries, Render says %d", i, got, running[0].Slots)
		}
	}
}

// TestWeightShares: the slots each backend holds follow its weight,
// exactly when the table can be, within 1/WeightSlots otherwise, a
// backend of a tiny weight keeps one slot, and a Maglev table gives each
// backend its weight's share of the slots within a few of them.
func TestWeightShares(t *testing.T) {
	for _, tc := range []struct {
		weights []int64
		want    []int // nil: within one slot of the exact share
	}{
		{[]int64{70, 30}, []int{7, 3}},
		{[]int64{35, 35, 30}, []int{7, 7, 6}},
		{[]int64{0, 0, 2}, []int{1, 1, 2}},
		{[]int64{999_999, 1}, []int{999, 1}},
		{[]int64{333_333, 333_334, 1_000_000, 7}, nil},
	} {
		var bs []Backend
		var total int64
		for i, w := range tc.weights {
			bs = append(bs, wep("10.98.10."+strconv.Itoa(i+1), 80, w))
			total += weightOf(bs[i])
		}
		got := apportion(bs)
		if tc.want != nil {
			if !slices.Equal(got, tc.want) {
				t.Errorf("weights %v: slots %v, want %v", tc.weights, got, tc.want)
			}
			continue
		}
		sum := 0
		for _, n := range got {
			sum += n
		}
		if sum != WeightSlots {
			t.Errorf("weights %v: %d slots", tc.weights, sum)
		}
		for i, n := range got {
			exact := float64(WeightSlots) * float64(weightOf(bs[i])) / float64(total)
			if d := float64(n) - exact; d <= -1 || d >= 1 || n == 0 {
				t.Errorf("weights %v: backend %d holds %d slots, its share is %.2f", tc.weights, i, n, exact)
			}
		}
	}
	bs := []Backend{wep("10.98.10.2", 80, 3), wep("10.98.10.3", 80, 1), wep("10.98.10.4", 80, 0)}
	held := map[Backend]int{}
	for _, b := range maglev(bs, MaglevSlots) {
		held[b]++
	}
	for b, want := range map[Backend]float64{bs[0]: 0.6, bs[1]: 0.2, bs[2]: 0.2} {
		if d := float64(held[b]) - want*MaglevSlots; d < -5 || d > 5 {
			t.Errorf("maglev: %v holds %d slots, want about %.0f", b.Addr, held[b], want*MaglevSlots)
		}
	}
}
