package nft

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

func backends(n int) []Backend {
	var out []Backend
	for i := range n {
		out = append(out, Backend{Addr: netip.AddrFrom4([4]byte{10, 98, byte(i / 250), byte(i%250 + 2)}), Port: 8080})
	}
	return out
}

// TestMaglevSharesAndDisruption: every endpoint gets its share of the
// table within a few slots, the table depends only on the set, and an
// endpoint that goes moves its own slots and few others (a flow on
// another endpoint mostly keeps it), one that comes takes about 1/N.
func TestMaglevSharesAndDisruption(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			bs := backends(n)
			table := maglev(bs, MaglevSlots)
			count := map[Backend]int{}
			for _, b := range table {
				count[b]++
			}
			for _, b := range bs {
				if got, want := count[b], MaglevSlots/n; got < want-want/10-2 || got > want+want/10+2 {
					t.Errorf("endpoint %v has %d slots, want about %d", b, got, want)
				}
			}
			if again := maglev(slices.Clone(bs), MaglevSlots); !slices.Equal(table, again) {
				t.Fatal("two tables of the same endpoints differ")
			}
			if n == 1 {
				return
			}
			// Maglev moves a few slots of the others too (it balances
			// first): at most 5 % of the table.
			fewer := maglev(bs[1:], MaglevSlots)
			others := 0
			for i := range table {
				if table[i] != bs[0] && fewer[i] != table[i] {
					others++
				}
			}
			if others > MaglevSlots/20 {
				t.Errorf("%d slots of the other endpoints moved when %v went", others, bs[0])
			}
			t.Logf("endpoint gone: %d slots of the others moved", others)
			more := maglev(backends(n+1), MaglevSlots)
			moved := 0
			for i := range table {
				if more[i] != table[i] {
					moved++
				}
			}
			if limit := MaglevSlots/(n+1) + MaglevSlots/10; moved > limit {
				t.Errorf("a new endpoint moved %d slots, want at most %d", moved, limit)
			}
		})
	}
}
