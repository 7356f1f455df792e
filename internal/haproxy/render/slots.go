package render

import (
	"net/netip"

	"pier.dev/pier/internal/encode"
)

// Slots records, per pool ID, which member (address:port) holds each
// server slot, s1 first; a zero AddrPort is a free slot. A member keeps
// its slot while it lives, so the assignment depends on the previous one:
// the agent keeps it with the load balancer (layout.LB.Slots) and passes
// it to the next Render. Only used to match members to slots: nothing in
// it is ever written to a HAProxy file.
type Slots map[string][]netip.AddrPort

// assignSlots places members (sorted, validated) into n >= len(members)
// slots. A member found in prev keeps its slot. New members take free
// slots in order, first those already free in prev, then those vacated
// now: a slot whose member just left is parked in maint and may still
// drain that member's connections. The result depends only on members,
// n and prev, so the same spec and history render the same bytes.
func assignSlots(members []slot, n int, prev []netip.AddrPort) []slot {
	out := make([]slot, n)
	taken := make([]bool, n)
	byKey := map[netip.AddrPort][]int{} // member indexes, in sorted order
	for i, m := range members {
		byKey[m.key()] = append(byKey[m.key()], i)
	}
	placed := make([]bool, len(members))
	for i, k := range prev {
		if i >= n || !k.IsValid() || len(byKey[k]) == 0 {
			continue
		}
		m := byKey[k][0]
		byKey[k] = byKey[k][1:]
		out[i], taken[i], placed[m] = members[m], true, true
	}
	free := freeSlots(taken, prev)
	for m := range members {
		if !placed[m] {
			out[free[0]], taken[free[0]] = members[m], true
			free = free[1:]
		}
	}
	for i := range out {
		if !taken[i] {
			out[i] = placeholder
		}
	}
	return out
}

// freeSlots lists the slots not taken: those free in prev first, then
// those prev gave to a member that is gone.
func freeSlots(taken []bool, prev []netip.AddrPort) []int {
	var wasFree, vacated []int
	for i, t := range taken {
		switch {
		case t:
		case i < len(prev) && prev[i].IsValid():
			vacated = append(vacated, i)
		default:
			wasFree = append(wasFree, i)
		}
	}
	return append(wasFree, vacated...)
}

func (s slot) key() netip.AddrPort { return netip.AddrPortFrom(s.addr, uint16(s.port)) }

// slotsOf records a view's assignment.
func slotsOf(v *view) Slots {
	out := make(Slots, len(v.pools))
	for _, p := range v.pools {
		keys := make([]netip.AddrPort, len(p.slots))
		for i, s := range p.slots {
			if s.used {
				keys[i] = s.key()
			}
		}
		out[p.id] = keys
	}
	return out
}

// Server names one server line: its backend and its slot, as HAProxy's
// runtime API reports them (`show servers state`).
type Server struct {
	Backend, Name string
}

// Member is a server that holds a member, and the member it holds.
type Member struct {
	Server
	Addr netip.AddrPort
}

// MembersStateCommands are the runtime commands that read the state of
// Members: one "show servers state" per backend that holds a member.
func (r *Result) MembersStateCommands() ([]encode.Command, error) {
	var out []encode.Command
	for _, p := range r.view.pools {
		used := false
		for _, s := range p.slots {
			used = used || s.used
		}
		if !used {
			continue
		}
		c, err := encode.ShowServersState(r.names.backend(r.UUID, p.id))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// FrontendStatCommands are the runtime commands that read the request
// counters of the load balancer: one "show stat" per HTTP frontend of
// its listeners, in listener order. A passthrough listener's TCP
// frontend carries connections, not requests, and is not read; nor are
// the internal frontends of auth-url and custom errors, whose requests
// are a listener's requests again.
func (r *Result) FrontendStatCommands() ([]encode.Command, error) {
	var out []encode.Command
	for i := range r.view.listeners {
		l := &r.view.listeners[i]
		if !l.terminates() {
			continue
		}
		c, err := encode.ShowFrontendStat(frontendName(r.UUID, l.port))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// FrontendNames names the frontends FrontendStatCommands reads, in
// their order.
func (r *Result) FrontendNames() []string {
	var out []string
	for i := range r.view.listeners {
		if l := &r.view.listeners[i]; l.terminates() {
			out = append(out, frontendName(r.UUID, l.port).String())
		}
	}
	return out
}

// Members lists the servers that hold a member (the used slots), pool by
// pool, slot by slot: what counts as a member when HAProxy is asked
// which are up. Free slots are placeholders and do not count.
func (r *Result) Members() []Member {
	var out []Member
	for _, p := range r.view.pools {
		be := r.names.backend(r.UUID, p.id).String()
		for i, s := range p.slots {
			if s.used {
				out = append(out, Member{Server: Server{Backend: be, Name: serverName(i).String()}, Addr: s.key()})
			}
		}
	}
	return out
}
