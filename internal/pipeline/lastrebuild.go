package pipeline

import (
	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/gatewayapi"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// lastRebuild is what the pipeline keeps of its last rebuild for the
// next one: the translation a change is patched into, the indexes the
// patch reads, and what the result refers to (classify's references).
// It alone decides how a rebuild translates (translate): everything, the
// members of some Services' pools patched into the last translation
// (translate.EndpointMembers), or the load balancers of the changed
// Ingresses alone (translate.IngressChanges). The answer travels on as a
// change, which the reconciler, the references and the status pass read
// instead of deciding again. Owned by Run's goroutine.
type lastRebuild struct {
	// translated is the last translation as translation left it, for the
	// next change to patch; nil when there is none: before the first
	// rebuild, after one the reconciler failed, refused load balancers of
	// or had problems with (its result then differs from what the status
	// pass reads, which only a full translation gives back), or after a
	// store change behind pier's back (forget).
	translated *translate.Result
	// pools indexes the pools of poolsOf, which a members patch keeps
	// (translate.IndexPools): built at the first endpoint change after
	// any other rebuild, or when Run is idle before it (index), then
	// kept.
	pools   translate.PoolIndex
	poolsOf *translate.Result
	// endpoints finds the Services and slices of an endpoint change in
	// the snapshot it indexes; once built, advance moves it along from
	// one snapshot to the next.
	endpoints *translate.EndpointIndex
	// refs are the Services, Secrets and ConfigMaps the last result
	// refers to, which classify compares.
	refs references
}

// changeKind is how a rebuild translated.
type changeKind int

const (
	// translatedAll: every Ingress, Service and Gateway again.
	translatedAll changeKind = iota
	// ingressesChanged: the load balancers of the changed Ingresses
	// alone (translate.IngressChanges).
	ingressesChanged
	// membersChanged: the result differs from the last translation in
	// pool members alone (translate.EndpointMembers).
	membersChanged
)

// change is what a rebuild translated, and how: the one answer to "what
// changed" that every later step of the rebuild reads.
type change struct {
	kind changeKind
	res  *translate.Result
	// patched, for membersChanged, are the load balancers whose members
	// differ from the last translation's, in res's order: the only ones
	// that differ from what the last Apply was given.
	patched []*model.LoadBalancer
}

// incremental reports whether less than everything was translated.
func (c change) incremental() bool { return c.kind != translatedAll }

// membersOnly reports whether res differs from the last translation in
// pool members alone: nothing a status pass or classify reads changed.
func (c change) membersOnly() bool { return c.kind == membersChanged }

// translate translates snap as e, its classification against prev,
// calls for: incrementally when e says only endpoints or only Ingresses
// changed and the last translation is a base, and the incremental
// translation can be known to equal a full one; else in full.
func (l *lastRebuild) translate(prev, snap *source.Snapshot, e effect, opts translate.Options) change {
	if l.translated != nil && e.endpoints != nil {
		l.index(snap) // built already, unless no idle time came since the last rebuild
		if res, patched, ok := translate.EndpointMembers(l.translated, l.pools, l.endpoints, snap, e.endpoints, opts); ok {
			return change{kind: membersChanged, res: res, patched: patched}
		}
	}
	if l.translated != nil && e.ingresses {
		if res, ok := translate.IngressChanges(l.translated, prev, snap, opts); ok {
			return change{kind: ingressesChanged, res: res}
		}
	}
	res := translate.Ingresses(snap, opts)
	res.Merge(translate.Services(snap, opts))
	res.Merge(gatewayapi.Translate(snap, opts))
	return change{kind: translatedAll, res: res}
}

// keep records what the rebuild of c from snap left, once reconciled as
// applied says: its translation is the next change's base when the
// reconciler took all of it, and its references are classify's (a
// members change leaves them: nothing they are made of changed).
// defaultCert is the default certificate's Secret, if any.
func (l *lastRebuild) keep(snap *source.Snapshot, c change, applied controller.Outcome, defaultCert string) {
	l.translated = nil
	if len(applied.Problems) == 0 && len(applied.Refused) == 0 {
		l.translated = c.res
		if c.membersOnly() {
			l.poolsOf = c.res // the patch kept every load balancer's place and pools
		}
	}
	if c.membersOnly() {
		return
	}
	l.refs = referencesOf(snap, c.res.Ours)
	if defaultCert != "" {
		l.refs.secrets[defaultCert] = true // every Ingress's load balancer serves it
	}
	// Every pool's Service: those annotations name (auth-url, also of
	// another namespace, default-backend) as much as the routes'.
	for _, lb := range c.res.LoadBalancers {
		for _, pool := range lb.Pools {
			if pool.Service != "" {
				l.refs.services[pool.Namespace+"/"+pool.Service] = true
			}
		}
	}
}

// forget drops the base of the next patch: the next rebuild translates
// everything.
func (l *lastRebuild) forget() { l.translated = nil }

// advance moves the endpoint index, if it indexes prev, to next.
func (l *lastRebuild) advance(prev, next *source.Snapshot) {
	if l.endpoints.Of(prev) {
		l.endpoints.Update(prev, next)
	}
}

// indexed reports whether the indexes an endpoint change uses are those
// of the last translation and of snap.
func (l *lastRebuild) indexed(snap *source.Snapshot) bool {
	return l.poolsIndexed() && l.endpoints.Of(snap)
}

// poolsIndexed reports whether the pool index is the last translation's,
// or there is none to index.
func (l *lastRebuild) poolsIndexed() bool {
	return l.translated == nil || l.poolsOf == l.translated
}

// index builds what an endpoint change of snap needs and is not built
// yet: the pool index of the last translation, the endpoint index of
// snap. At 3,000 Ingresses the two took 6 ms of the first endpoint
// change after a start or an Ingress change, when it was built then;
// Run builds them when it is idle.
func (l *lastRebuild) index(snap *source.Snapshot) {
	if !l.poolsIndexed() {
		l.pools, l.poolsOf = translate.IndexPools(l.translated), l.translated
	}
	if snap != nil && !l.endpoints.Of(snap) {
		l.endpoints = translate.IndexEndpoints(snap)
	}
}
