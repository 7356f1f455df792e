package nft

import (
	"bytes"
	"net/netip"
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
