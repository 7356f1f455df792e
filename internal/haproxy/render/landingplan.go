package render

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// parked is n free slots, as a spare backend declares them.
func parked(n int) []slot {
	return slices.Repeat([]slot{placeholder}, n)
}

// Landable reports why the landing cannot serve r exactly as r's own
// fragment does, or "" when it can: an IPv4 VIP (and FIP), one plain
// HTTP listener on the landing's port whose policies are all map routes
// (exact, wildcard or no host; Exact or Prefix path; no options, no
// HTTPRoute matches), and pools of members only, within the slots.
func Landable(r *Result, o LandingOptions) string {
	if r == nil || r.view == nil {
		return "not rendered"
	}
	v := r.view
	switch {
	case !v.vip.Is4() || (v.fip.IsValid() && !v.fip.Is4()):
		return "an IPv6 address"
	case len(v.listeners) != 1:
		return "more than one listener"
	case v.authLuaPath != "":
		return "auth or custom errors"
	}
	l := &v.listeners[0]
	switch {
	case l.tls || len(l.passthrough) > 0:
		return "a TLS listener"
	case l.tcp:
		return "a TCP listener"
	case l.port != o.Port:
		return "listener port " + strconv.Itoa(l.port) + " is not the landing's " + strconv.Itoa(o.Port)
	case len(l.policies) > 0 && l.routes == nil:
		return "policies the route maps cannot express"
	case len(l.profiles) > 0:
		return "policy options (annotations)"
	}
	if t := l.routes; t != nil {
		switch {
		case t.hasRegex():
			return "a regular-expression path"
		case t.match != nil:
			return "HTTPRoute matches"
		case len(t.files[classSuffix][kindExact]) > 0 || len(t.files[classSuffix][kindPrefix]) > 0 || t.root[classSuffix]:
			return "a Gateway wildcard host"
		}
	}
	for _, p := range l.policies {
		if strings.Contains(p.route.path, ";") {
			return "a path with ';' (the runtime API's command separator)"
		}
	}
	for i := range v.pools {
		if reason := spareReason(&v.pools[i], o.Slots); reason != "" {
			return "pool " + encode.Printable(v.pools[i].id) + ": " + reason
		}
	}
	if len(v.pools) > o.Backends {
		return "more pools than spare backends"
	}
	return ""
}

// spareReason says why pool p needs more than a spare backend has.
// Health checks are not a reason: every pool checks its members by
// default, so refusing them would land nothing. The spare slots are not
// checked; the landing serves for the seconds until the shard reloads,
// which checks them from then on (a member that refuses connections is
// down at its first check there).
func spareReason(p *poolView, slots int) string {
	switch {
	case p.tcp:
		return "TCP"
	case p.balance.String() != "roundrobin":
		return "balance " + p.balance.String()
	case p.connect != 0 || p.server != 0:
		return "timeouts"
	case p.cookie != nil:
		return "affinity"
	case len(p.protocol) > 0 || p.proto != "" || p.upstream != (model.UpstreamTLS{}):
		return "backend protocol"
	case p.tries != 0 || len(p.retryOn) > 0:
		return "retries"
	case p.fail != 0:
		return "failing share"
	case len(p.reqHeaders) > 0:
		return "request headers"
	case p.rewrite != nil:
		return "path rewrite"
	case len(p.slots) > slots:
		return strconv.Itoa(len(p.slots)) + " slots, spare backends have " + strconv.Itoa(slots)
	}
	return ""
}

// LandingPlan is one load balancer in the landing process, as runtime
// commands for its runtime socket, each list sent in order over one
// connection.
type LandingPlan struct {
	// Land fills its spare backends' slots, adds its route entries in
	// the order of its own maps (map_beg takes the first entry a key
	// starts with), its settings, and last its addresses.
	Land []encode.Command
	// Unbind removes its addresses: sent once its shard serves them, so
	// that no new connection lands here.
	Unbind []encode.Command
	// Retire removes its routes and settings and parks its servers: sent
	// after Unbind, once the requests in flight are done.
	Retire []encode.Command
}

// PlanLanding plans load balancer r's landing under landing id (unique
// among the landed ones) in folder p, its pools (in r's pool order) in
// the spare backends spares. r must be Landable.
func PlanLanding(r *Result, p layout.Process, o LandingOptions, id int, spares []int) (LandingPlan, error) {
	if reason := Landable(r, o); reason != "" {
		return LandingPlan{}, errors.New("landing: " + reason)
	}
	v := r.view
	if len(spares) != len(v.pools) {
		return LandingPlan{}, fmt.Errorf("landing: %d spare backends for %d pools", len(spares), len(v.pools))
	}
	var plan LandingPlan
	bes, err := landingPools(v, o, spares, &plan)
	if err != nil {
		return LandingPlan{}, err
	}
	file := func(name string) encode.Word { return encode.FilePath(p.LandingMap(name)) }
	l := &v.listeners[0]
	var routes, unroutes []encode.Command
	if l.routes != nil {
		if routes, unroutes, err = landingRouteCommands(v.uuid, l, id, file, bes); err != nil {
			return LandingPlan{}, err
		}
	}
	plan.Land = append(plan.Land, routes...)
	lid := encode.Num(id)
	flags := landingFlags(l.needHost, len(l.policies) > 0, l.pathScoped)
	settings := []struct {
		name  string
		value encode.Word
	}{{landingLBs, flags}}
	if l.defaultPool != "" {
		settings = append(settings, struct {
			name  string
			value encode.Word
		}{landingDefaults, bes[backendName(v.uuid, l.defaultPool).String()]})
	}
	for _, s := range settings {
		add, err := encode.AddMap(file(s.name), lid, s.value)
		if err != nil {
			return LandingPlan{}, err
		}
		del, err := encode.DelMap(file(s.name), lid)
		if err != nil {
			return LandingPlan{}, err
		}
		plan.Land = append(plan.Land, add)
		unroutes = append(unroutes, del)
	}
	plan.Retire = append(unroutes, plan.Retire...)
	addrs := []encode.Word{encode.Addr(v.vip)}
	if v.fip.IsValid() {
		addrs = append(addrs, encode.Addr(v.fip))
	}
	for _, a := range addrs {
		add, err := encode.AddMap(file(landingVIPs), a, lid)
		if err != nil {
			return LandingPlan{}, err
		}
		del, err := encode.DelMap(file(landingVIPs), a)
		if err != nil {
			return LandingPlan{}, err
		}
		plan.Land = append(plan.Land, add)
		plan.Unbind = append(plan.Unbind, del)
	}
	return plan, nil
}

// landingPools puts the servers of v's pools in the spare backends
// (spares, in v's pool order): the commands that fill them go to
// plan.Land, those that park them again to plan.Retire. It returns each
// pool's spare backend by the pool's own backend name.
func landingPools(v *view, o LandingOptions, spares []int, plan *LandingPlan) (map[string]encode.Word, error) {
	bes := map[string]encode.Word{}
	for i := range v.pools {
		pv := &v.pools[i]
		if spares[i] < 0 || spares[i] >= o.Backends {
			return nil, fmt.Errorf("landing: spare backend %d of %d", spares[i], o.Backends)
		}
		be := landingBackend(spares[i])
		bes[backendName(v.uuid, pv.id).String()] = be
		free := poolView{slots: parked(len(pv.slots))}
		fill, err := slotCommands(be, &free, pv)
		if err != nil {
			return nil, err
		}
		park, err := slotCommands(be, pv, &free)
		if err != nil {
			return nil, err
		}
		plan.Land = append(plan.Land, fill...)
		plan.Retire = append(plan.Retire, park...)
	}
	return bes, nil
}

// landingRouteCommands are the add and del commands of the listener's
// route entries, in the order of its own maps (routeEntries).
func landingRouteCommands(uuid string, l *listenerView, id int, file func(string) encode.Word, bes map[string]encode.Word) (adds, dels []encode.Command, err error) {
	entries, err := routeEntries(uuid, l.policies, &routeTable{})
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		value := e.plain
		if be, ok := bes[value.String()]; ok {
			value = be
		} else if !strings.HasPrefix(value.String(), "pier_") { // reject, status
			return nil, nil, fmt.Errorf("landing: route value %s", encode.Printable(value.String()))
		}
		var key encode.Word
		name := landingRouteMap(e.r.class, e.kind)
		if e.anyRoot {
			key, name = encode.LandingRoot(id), landingRouteMap(classAny, kindExact)
		} else {
			key = encode.LandingKey(id, e.key)
		}
		add, err := encode.AddMap(file(name), key, value)
		if err != nil {
			return nil, nil, err
		}
		del, err := encode.DelMap(file(name), key)
		if err != nil {
			return nil, nil, err
		}
		adds, dels = append(adds, add), append(dels, del)
	}
	return adds, dels, nil
}

// landingFlags is a landed load balancer's value in lbs.map: "x" (a map
// value is never empty), then flagHost, flagPaths and flagScoped when
// they apply.
func landingFlags(host, paths, scoped bool) encode.Word {
	i := 0
	for bit, on := range []bool{host, paths, scoped} {
		if on {
			i |= 1 << bit
		}
	}
	return [...]encode.Word{
		encode.Lit("x"), encode.Lit("x" + flagHost), encode.Lit("x" + flagPaths), encode.Lit("x" + flagHost + flagPaths),
		encode.Lit("x" + flagScoped), encode.Lit("x" + flagHost + flagScoped), encode.Lit("x" + flagPaths + flagScoped),
		encode.Lit("x" + flagHost + flagPaths + flagScoped),
	}[i]
}
