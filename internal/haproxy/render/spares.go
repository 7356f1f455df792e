package render

import (
	"bytes"
	"strconv"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// Spare pools. HAProxy 2.6 cannot add a backend at runtime, so a route to
// a Service a load balancer did not route to before needed a reload of
// its shard. A shared load balancer (an Ingress group, a Gateway), which
// is where such routes come and go, keeps a few empty backends of the
// shape most of its pools have (spareTemplate): a new pool of that shape
// takes one through the runtime API (its
// members set in the spare's server slots, its routes' map entries naming
// the spare). The new fragment on disk names the pool's own backend, so
// the next load of the shard runs it there and the spares are empty
// again. A pool of another shape, or one more than the spares, reloads.

// DefaultSparePools is Options.SparePools when unset.
const DefaultSparePools = 2

// spareID is the pool id of spare k (from 1). A model pool id never
// has this shape (translate's ids are digests); a load balancer that
// has one anyway gets no spares (spareViews).
func spareID(k int) string { return "spare-" + strconv.Itoa(k) }

// sharedLB reports whether routes to new Services are expected on lb:
// it serves an Ingress group or a Gateway.
func sharedLB(lb *model.LoadBalancer) bool {
	if strings.HasPrefix(lb.Name, "group:") {
		return true
	}
	for _, s := range lb.Sources {
		if s.Kind == model.KindGateway {
			return true
		}
	}
	return false
}

// spareViews are n empty pools of the load balancer's common shape, with
// minSlots slots each; none if a pool of lb already has a spare's id.
func spareViews(n, minSlots int, pools []poolView, maxConn int) ([]poolView, error) {
	template, err := spareTemplate(pools, minSlots, maxConn)
	if err != nil {
		return nil, err
	}
	var out []poolView
	for k := 1; k <= n; k++ {
		for _, p := range pools {
			if p.id == spareID(k) {
				return nil, nil
			}
		}
		pv := template
		pv.id = spareID(k)
		pv.slots = parked(len(template.slots))
		out = append(out, pv)
	}
	return out, nil
}

// spareTemplate is an empty pool of the shape most of the load
// balancer's plain pools have (the first by id on a tie): a joining
// Ingress's pool gets the settings of the group's annotations, which
// its members likely share. Plain pools have no affinity, upstream TLS,
// fault injection, header changes or path rewrites, whose lines name
// files or differ per pool. Without one, the shape of a pool with translate's defaults.
func spareTemplate(pools []poolView, minSlots, maxConn int) (poolView, error) {
	count := map[string]int{}
	best, bestCount := -1, 0
	for i := range pools {
		p := &pools[i]
		if p.cookie != nil || p.tcp || p.upstream != (model.UpstreamTLS{}) || p.fail != 0 || len(p.reqHeaders) > 0 || p.rewrite != nil {
			continue
		}
		shape := poolShape(p, maxConn)
		count[shape]++
		if count[shape] > bestCount {
			best, bestCount = i, count[shape]
		}
	}
	empty := parked(slotCount(0, minSlots))
	if best < 0 {
		pv, err := poolOf(&model.Pool{ID: "spare", Algorithm: model.AlgorithmRoundRobin}, minSlots, nil)
		return pv, err
	}
	pv := pools[best]
	pv.slots = empty
	return pv, nil
}

// poolShape is p's backend section with another name and one empty
// slot (server lines carry words of the pool too: health checks,
// protocol, cookie): two pools of one shape differ only in their members.
func poolShape(p *poolView, maxConn int) string {
	var c encode.Config
	shape := *p
	shape.id, shape.slots = "shape", []slot{placeholder}
	writeBackend(&c, "00000000-0000-0000-0000-000000000000", &shape, maxConn)
	b, err := c.Bytes()
	if err != nil {
		return "" // matches no spare
	}
	return string(b)
}

// fitsSpare reports whether pool p can run in one of v's spares.
func (v *view) fitsSpare(p *poolView) bool {
	if len(v.spares) == 0 || len(p.slots) != len(v.spares[0].slots) {
		return false
	}
	shape := poolShape(p, v.backendMaxConn)
	return shape != "" && shape == poolShape(&v.spares[0], v.backendMaxConn)
}

// withoutSpareFits drops from fragment the backend sections of the pools
// that fit a spare, for the route skeleton: a pool that fits may come
// or go without a reload (takeSpares).
func withoutSpareFits(fragment []byte, v *view) []byte {
	if len(v.spares) == 0 {
		return fragment
	}
	drop := map[string]bool{}
	for i := range v.pools {
		if v.fitsSpare(&v.pools[i]) {
			drop["backend "+backendName(v.uuid, v.pools[i].id).String()+"\n"] = true
		}
	}
	blocks := bytes.Split(fragment, []byte("\n\n"))
	kept := blocks[:0]
	for _, b := range blocks {
		head, _, _ := bytes.Cut(b, []byte("\n"))
		if !drop[string(head)+"\n"] {
			kept = append(kept, b)
		}
	}
	return bytes.Join(kept, []byte("\n\n"))
}

// runningNames are the names the running HAProxy knows a result's maps
// and pools by, where they are not the result's own: after runtime
// updates, until the next load of the shard (Result.Reloaded).
type runningNames struct {
	maps  map[string]string // map label → the file the process loaded it from
	pools map[string]string // pool id → the spare it runs in
}

// backend is the backend pool id runs in.
func (n runningNames) backend(uuid, poolID string) encode.Word {
	if spare, ok := n.pools[poolID]; ok {
		return backendName(uuid, spare)
	}
	return backendName(uuid, poolID)
}

// forPools is n without the pools that are not in v; copied, never shared
// with the result n came from.
func (n runningNames) forPools(v *view) runningNames {
	out := runningNames{}
	if len(n.maps) > 0 {
		out.maps = make(map[string]string, len(n.maps))
		for k, name := range n.maps {
			out.maps[k] = name
		}
	}
	for _, p := range v.pools {
		if spare, ok := n.pools[p.id]; ok {
			if out.pools == nil {
				out.pools = map[string]string{}
			}
			out.pools[p.id] = spare
		}
	}
	return out
}

// takeSpares gives each pool new has and old had not a spare of old's,
// and returns the commands that fill the spares' slots with the pools'
// members; or why that cannot be done. A pool old had and new has not
// keeps its backend, unused, until the next reload; one running in a
// spare cannot leave without a reload (its spare would have to be
// emptied and its slots would not match old's view of the spare).
func takeSpares(old, new *Result, names *runningNames) ([]encode.Command, string) {
	ov, nv := old.view, new.view
	had := map[string]bool{}
	for _, p := range ov.pools {
		had[p.id] = true
	}
	has := map[string]bool{}
	for _, p := range nv.pools {
		has[p.id] = true
	}
	for id := range old.names.pools {
		if !has[id] {
			return nil, "a pool running in a spare left"
		}
	}
	taken := map[string]bool{}
	for _, spare := range old.names.pools {
		taken[spare] = true
	}
	var cmds []encode.Command
	for i := range nv.pools {
		p := &nv.pools[i]
		if had[p.id] {
			continue
		}
		if !ov.fitsSpare(p) {
			return nil, "new pool " + encode.Printable(p.id) + " does not fit a spare"
		}
		k := -1
		for j := range ov.spares {
			if !taken[ov.spares[j].id] {
				k = j
				break
			}
		}
		if k < 0 {
			return nil, "no spare pool left"
		}
		spare := &ov.spares[k]
		taken[spare.id] = true
		if names.pools == nil {
			names.pools = map[string]string{}
		}
		names.pools[p.id] = spare.id
		pc, err := slotCommands(backendName(nv.uuid, spare.id), spare, p)
		if err != nil {
			return nil, err.Error()
		}
		cmds = append(cmds, pc...)
	}
	return cmds, ""
}
