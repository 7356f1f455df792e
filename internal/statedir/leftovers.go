package statedir

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// Leftover is a load balancer a previous pier left in the state folder:
// its UUID, its name when the folder records it, and the addresses it
// served on.
type Leftover struct {
	UUID  string
	Name  string // "" when unknown (a HAProxy folder does not record it)
	Addrs []netip.Addr
}

// Leftovers lists the load balancers whose folders a previous pier left
// below dir, sorted by UUID: each HAProxy load balancer folder
// (haproxy/<uuid>/haproxy.conf, its bind addresses) and each spec the
// native driver saved (native/<uuid>.json). A folder that cannot be read
// or parsed is skipped: it proves nothing.
func Leftovers(dir string) ([]Leftover, error) {
	byUUID := map[string]*Leftover{}
	add := func(uuid, name string, addrs []netip.Addr) {
		if len(addrs) == 0 {
			return
		}
		l := byUUID[uuid]
		if l == nil {
			l = &Leftover{UUID: uuid}
			byUUID[uuid] = l
		}
		if name != "" {
			l.Name = name
		}
		for _, a := range addrs {
			if !slices.Contains(l.Addrs, a) {
				l.Addrs = append(l.Addrs, a)
			}
		}
	}
	lay, err := layout.New(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(lay.Root())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", lay.Root(), err)
	}
	for _, e := range entries {
		at, err := lay.LB(e.Name())
		if err != nil || !e.IsDir() {
			continue // a shard's or the landing process's folder, or a stray file
		}
		add(at.UUID, "", bindAddresses(at.Config()))
	}
	native := filepath.Join(dir, "native")
	entries, err = os.ReadDir(native)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", native, err)
	}
	for _, e := range entries {
		uuid, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !layout.ValidUUID(uuid) {
			continue
		}
		var lb model.LoadBalancer
		data, err := os.ReadFile(filepath.Join(native, e.Name()))
		if err != nil || json.Unmarshal(data, &lb) != nil || lb.UUID != uuid {
			continue
		}
		var addrs []netip.Addr
		for _, s := range []string{lb.VIP, lb.FIP} {
			if a, err := netip.ParseAddr(s); err == nil {
				addrs = append(addrs, a.Unmap())
			}
		}
		add(uuid, lb.Name, addrs)
	}
	out := make([]Leftover, 0, len(byUUID))
	for _, l := range byUUID {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out, nil
}

// bindAddresses reads the addresses of the "bind ADDR:PORT" lines of a
// load balancer's fragment (render writes one per address and port).
// Binds on an abstract socket (TLS passthrough's inner frontend) are not
// addresses and are skipped.
func bindAddresses(conf string) []netip.Addr {
	f, err := os.Open(conf)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "bind" {
			continue
		}
		ap, err := netip.ParseAddrPort(fields[1])
		if err != nil {
			continue
		}
		if a := ap.Addr().Unmap(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
