package controller

import (
	"reflect"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// lastApply is the reconciler's memory of its passes: what each one made
// of every load balancer it placed, and the nodes the last complete one
// placed them on. It alone answers whether a load balancer need not be
// prepared again (placedAsIs) and whether ApplyChanged may stand for
// Apply (covers).
//
// An entry counts only if the last complete pass left it (its generation
// is complete): entries are kept from one pass to the next and marked,
// not rebuilt, as thousands of them would cost an endpoint change a map
// of thousands of writes.
type lastApply struct {
	byUUID map[string]*applied
	// nodes are those of the last complete pass; nil after one that
	// failed, or while one is under way.
	nodes    []source.Node
	complete int // the generation of the last complete pass
	pass     int // the generation of the pass under way
}

// applied pairs a translated load balancer with the index entry a pass
// left for it (stored, or found unchanged), and the pass that did.
type applied struct {
	want, stored *model.LoadBalancer
	gen          int
}

// begin starts a pass over nodes and reports whether they are those of
// the last complete one.
func (l *lastApply) begin(nodes []source.Node) (sameNodes bool) {
	sameNodes = l.nodes != nil && reflect.DeepEqual(l.nodes, nodes)
	l.nodes = nil // until this pass completes
	l.pass++
	if l.byUUID == nil {
		l.byUUID = map[string]*applied{}
	}
	return sameNodes
}

// completed records that the pass under way placed everything on nodes.
func (l *lastApply) completed(nodes []source.Node) {
	l.nodes = append([]source.Node{}, nodes...)
	l.complete = l.pass
}

// failed makes the next pass a full one.
func (l *lastApply) failed() { l.nodes = nil }

// remember records what this pass made of want.
func (l *lastApply) remember(want, stored *model.LoadBalancer) {
	if a := l.byUUID[want.UUID]; a != nil {
		a.want, a.stored, a.gen = want, stored, l.pass
		return
	}
	l.byUUID[want.UUID] = &applied{want: want, stored: stored, gen: l.pass}
}

// forget drops a deleted load balancer.
func (l *lastApply) forget(uuid string) { delete(l.byUUID, uuid) }

// placedAsIs reports, and records for this pass, that want is the very
// load balancer the last complete pass placed, on the same nodes, and
// that old (the index's entry) is still what it left: preparing it again
// would give the same.
func (l *lastApply) placedAsIs(want, old *model.LoadBalancer, sameNodes bool) bool {
	a := l.byUUID[want.UUID]
	if a == nil || !sameNodes || a.gen != l.complete || a.want != want || a.stored != old {
		return false
	}
	a.gen = l.pass
	return true
}

// covers reports whether preparing changed alone, on nodes, gives what
// Apply of res would: no pass began since the last complete one, on the
// same nodes, which placed each of changed, still stored (stored), with
// the same requested addresses.
func (l *lastApply) covers(res *translate.Result, nodes []source.Node, changed []*model.LoadBalancer, stored func(uuid string) bool) bool {
	if l.nodes == nil || l.pass != l.complete || !reflect.DeepEqual(l.nodes, nodes) {
		return false
	}
	for _, want := range changed {
		a := l.byUUID[want.UUID]
		if a == nil || a.gen != l.complete || !stored(want.UUID) ||
			res.AddressRefused[want.UUID] || a.want.RequestedFIP != want.RequestedFIP {
			return false
		}
	}
	return true
}
