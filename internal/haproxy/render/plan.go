package render

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// Plan says how to move a running load balancer from one Result to the
// next. Either Reload (with a Reason for logs and status), or send
// Commands, in order, to the runtime socket. In both cases the agent
// writes the new fragment: after the commands, the running state is what
// a restart from that file gives.
type Plan struct {
	Reload   bool
	Reason   string
	Commands []encode.Command
	// Routes: some commands change route maps or fill spare pools
	// (mapupdate.go, spares.go).
	Routes bool
	// names are the names the running HAProxy knows the new result's
	// maps and pools by once the commands ran: pass the plan to the new
	// result's RunsWith.
	names runningNames
}

// PlanUpdate compares old (what runs, nil if nothing does) with new, two
// results of Render. Members may change without a reload while every
// pool keeps its number of slots; so may the entries of a mapped
// listener's exact and prefix maps (mapupdate.go), and pools of the
// common shape may join a shared load balancer in its spares
// (spares.go); anything else reloads. (Named PlanUpdate because Go does
// not allow a function and a type both called Plan.)
func PlanUpdate(old, new *Result) (Plan, error) {
	if new == nil || new.view == nil {
		return Plan{}, errors.New("plan: no rendered load balancer")
	}
	if old == nil || old.view == nil {
		return Plan{Reload: true, Reason: "first start"}, nil
	}
	ov, nv := old.view, new.view
	plan := Plan{names: old.names.forPools(nv)}
	var spareCmds, routeCmds []encode.Command // spares filled first, routes to them last
	reason := reloadReason(ov, nv, true)
	if reason == "" && old.skeleton != new.skeleton {
		reason = "configuration changed"
	}
	if reason != "" {
		// Perhaps only routes changed, in map entries the runtime API
		// can set, and pools that fit spares came or went.
		if reloadReason(ov, nv, false) != "" || old.routeSkeleton != new.routeSkeleton {
			return Plan{Reload: true, Reason: reason}, nil
		}
		var why string
		if spareCmds, why = takeSpares(old, new, &plan.names); why == "" {
			routeCmds, why = routeCommands(old, new, &plan.names)
		}
		if why != "" {
			return Plan{Reload: true, Reason: reason + " (" + why + ")"}, nil
		}
		plan.Routes = true
	}
	plan.Commands = spareCmds
	was := make(map[string]*poolView, len(ov.pools))
	for i := range ov.pools {
		was[ov.pools[i].id] = &ov.pools[i]
	}
	for i := range nv.pools {
		o := was[nv.pools[i].id]
		if o == nil {
			continue // took a spare
		}
		pc, err := slotCommands(plan.names.backend(nv.uuid, nv.pools[i].id), o, &nv.pools[i])
		if err != nil {
			return Plan{}, fmt.Errorf("plan %s: %w", encode.Printable(nv.uuid), err)
		}
		plan.Commands = append(plan.Commands, pc...)
	}
	plan.Commands = append(plan.Commands, routeCmds...)
	return plan, nil
}

// reloadReason returns "" when old and new differ in members only (and,
// unless routes, in their routing rules and which pools they have), else
// the first difference found, in words an operator understands.
func reloadReason(ov, nv *view, routes bool) string {
	switch {
	case ov.uuid != nv.uuid:
		return "load balancer uuid changed"
	case ov.vip != nv.vip:
		return "vip changed " + ov.vip.String() + "→" + nv.vip.String()
	case ov.fip != nv.fip:
		return "fip changed " + fipString(ov) + "→" + fipString(nv)
	}
	if r := listenerReason(ov.listeners, nv.listeners, routes); r != "" {
		return r
	}
	return poolReason(ov.pools, nv.pools, routes)
}

func fipString(v *view) string {
	if !v.fip.IsValid() {
		return "none"
	}
	return v.fip.String()
}

func listenerReason(ol, nl []listenerView, routes bool) string {
	ports := func(ls []listenerView) string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = strconv.Itoa(l.port)
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	if ports(ol) != ports(nl) {
		return "listeners changed " + ports(ol) + "→" + ports(nl)
	}
	for i := range nl {
		o, n := &ol[i], &nl[i]
		what := ""
		switch {
		case o.tls != n.tls:
			what = " protocol changed"
		case !slices.EqualFunc(o.certs, n.certs, sameCert) || !slices.EqualFunc(o.decryptCerts, n.decryptCerts, sameCert):
			// Same file names, new contents: HAProxy must load them again.
			what = " certificates changed"
		case o.defaultPool != n.defaultPool || (routes && !slices.EqualFunc(o.policies, n.policies, samePolicy)):
			what = " routing rules changed"
		case !slices.Equal(o.passthrough, n.passthrough):
			what = " passthrough hosts changed"
		}
		if what != "" {
			return "listener " + strconv.Itoa(n.port) + what
		}
	}
	return ""
}

func sameCert(a, b model.Certificate) bool {
	return a.ID == b.ID && a.SHA256 == b.SHA256 && slices.Equal(a.Hosts, b.Hosts)
}

func samePolicy(a, b policyView) bool {
	line := func(ws []encode.Word) string {
		s, _ := encode.ConfigLine(ws...)
		return s
	}
	if a.id != b.id || a.reject != b.reject || a.status != b.status || a.pool != b.pool || len(a.acls) != len(b.acls) {
		return false
	}
	for i := range a.acls {
		if line(a.acls[i]) != line(b.acls[i]) {
			return false
		}
	}
	return true
}

// poolReason compares the pools; unless sameSet, only those both have.
func poolReason(op, np []poolView, sameSet bool) string {
	ids := func(ps []poolView) (out []string) {
		for _, p := range ps {
			out = append(out, p.id)
		}
		return out
	}
	if sameSet && !slices.Equal(ids(op), ids(np)) {
		return "pools added or removed"
	}
	was := make(map[string]*poolView, len(op))
	for i := range op {
		was[op[i].id] = &op[i]
	}
	for i := range np {
		o, n := was[np[i].id], &np[i]
		if o == nil {
			continue
		}
		switch {
		case len(o.slots) != len(n.slots):
			return "pool " + encode.Printable(n.id) + " slots " + strconv.Itoa(len(o.slots)) + "→" + strconv.Itoa(len(n.slots))
		case o.check != n.check || o.balance.String() != n.balance.String() || !sameCookie(o.cookie, n.cookie) ||
			o.proto != n.proto || o.upstream != n.upstream || o.fail != n.fail || o.failTotal != n.failTotal: // server words, which the skeleton leaves out
			return "pool " + encode.Printable(n.id) + " settings changed"
		}
	}
	return ""
}

// slotCommands turns old slot contents into new ones. Filling a slot sets
// address and weight before "ready", so it never serves with stale
// values; emptying one sets "maint" first, then parks it on the
// placeholder so the state matches the rendered file. Every slot that
// serves afterwards is set before any is emptied: a member replaced by
// another in a different slot must not leave the pool with no server
// between the two commands (a 503 for the requests in that moment, seen
// when one member replaced the only other). be is the backend whose slots
// they are: the pool's own, a spare of its load balancer (spares.go), or a
// landing process's spare (landing.go).
func slotCommands(be encode.Word, o, n *poolView) ([]encode.Command, error) {
	var fills, empties []encode.Command
	for i := range n.slots {
		was, now := o.slots[i], n.slots[i]
		if was == now {
			continue
		}
		srv := serverName(i)
		var step []func() (encode.Command, error)
		if !now.used {
			step = append(step, func() (encode.Command, error) { return encode.SetServerState(be, srv, encode.StateMaint) })
		}
		if was.addr != now.addr || was.port != now.port {
			step = append(step, func() (encode.Command, error) { return encode.SetServerAddr(be, srv, now.addr, now.port) })
		}
		if was.weight != now.weight {
			step = append(step, func() (encode.Command, error) { return encode.SetServerWeight(be, srv, now.weight) })
		}
		if now.used && !was.used {
			step = append(step, func() (encode.Command, error) { return encode.SetServerState(be, srv, encode.StateReady) })
		}
		for _, f := range step {
			c, err := f()
			if err != nil {
				return nil, err
			}
			if now.used {
				fills = append(fills, c)
			} else {
				empties = append(empties, c)
			}
		}
	}
	return append(fills, empties...), nil
}
