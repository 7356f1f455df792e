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
}

// PlanUpdate compares old (what runs, nil if nothing does) with new, two
// results of Render. Only members may change without a reload, and only
// while every pool keeps its number of slots. (Named PlanUpdate because
// Go does not allow a function and a type both called Plan.)
func PlanUpdate(old, new *Result) (Plan, error) {
	if new == nil || new.view == nil {
		return Plan{}, errors.New("plan: no rendered load balancer")
	}
	if old == nil || old.view == nil {
		return Plan{Reload: true, Reason: "first start"}, nil
	}
	ov, nv := old.view, new.view
	if reason := reloadReason(ov, nv); reason != "" {
		return Plan{Reload: true, Reason: reason}, nil
	}
	if old.skeleton != new.skeleton {
		return Plan{Reload: true, Reason: "configuration changed"}, nil
	}
	var cmds []encode.Command
	for i := range nv.pools {
		pc, err := slotCommands(nv.uuid, &ov.pools[i], &nv.pools[i])
		if err != nil {
			return Plan{}, fmt.Errorf("plan %s: %w", encode.Printable(nv.uuid), err)
		}
		cmds = append(cmds, pc...)
	}
	return Plan{Commands: cmds}, nil
}

// reloadReason returns "" when old and new differ in members only, else
// the first difference found, in words an operator understands.
func reloadReason(ov, nv *view) string {
	switch {
	case ov.uuid != nv.uuid:
		return "load balancer uuid changed"
	case ov.vip != nv.vip:
		return "vip changed " + ov.vip.String() + "→" + nv.vip.String()
	case ov.fip != nv.fip:
		return "fip changed " + fipString(ov) + "→" + fipString(nv)
	}
	if r := listenerReason(ov.listeners, nv.listeners); r != "" {
		return r
	}
	return poolReason(ov.pools, nv.pools)
}

func fipString(v *view) string {
	if !v.fip.IsValid() {
		return "none"
	}
	return v.fip.String()
}

func listenerReason(ol, nl []listenerView) string {
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
		case !slices.EqualFunc(o.certs, n.certs, sameCert):
			// Same file names, new contents: HAProxy must load them again.
			what = " certificates changed"
		case o.defaultPool != n.defaultPool || !slices.EqualFunc(o.policies, n.policies, samePolicy):
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

func poolReason(op, np []poolView) string {
	ids := func(ps []poolView) (out []string) {
		for _, p := range ps {
			out = append(out, p.id)
		}
		return out
	}
	if !slices.Equal(ids(op), ids(np)) {
		return "pools added or removed"
	}
	for i := range np {
		o, n := &op[i], &np[i]
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
// placeholder so the state matches the rendered file.
func slotCommands(uuid string, o, n *poolView) ([]encode.Command, error) {
	return slotCommandsFor(backendName(uuid, n.id), o, n)
}

// slotCommandsFor is slotCommands for the slots of backend be (a landing
// process's spare backends hold another load balancer's pool).
func slotCommandsFor(be encode.Word, o, n *poolView) ([]encode.Command, error) {
	var cmds []encode.Command
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
			cmds = append(cmds, c)
		}
	}
	return cmds, nil
}
