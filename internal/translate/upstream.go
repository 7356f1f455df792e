package translate

import (
	"fmt"

	"pier.dev/pier/internal/model"
)

// applyUpstream sets the pool's tries and service-upstream from the
// Ingress that creates it (a Service port is one backend:
// upstreamConflict warns the others). Under --members-from-cluster-ip
// every pool is a ClusterIP already, and the annotation changes nothing.
func (s *ingressSettings) applyUpstream(pool *model.Pool, opts Options) {
	pool.Tries = s.Tries
	pool.ServiceUpstream = s.ServiceUpstream && !opts.MembersFromClusterIP
}

// upstreamConflict warns an Ingress whose service-upstream or
// proxy-next-upstream-tries for a pool differs from that of the Ingress
// that created it (older), as timeoutConflict does.
func upstreamConflict(pools map[string]*model.Pool, p *parsedIngress, poolID string, warned map[string]bool) []model.Problem {
	kept, mine := pools[poolID], p.pools[poolID]
	key := "upstream\x00" + p.source.Key() + "\x00" + poolID
	if kept == mine || warned[key] || (kept.Tries == mine.Tries && kept.ServiceUpstream == mine.ServiceUpstream) {
		return nil
	}
	warned[key] = true
	members := "its endpoints"
	if kept.ServiceUpstream {
		members = "its ClusterIP"
	}
	tries := "the default retries"
	if kept.Tries > 0 {
		tries = fmt.Sprintf("%d tries", kept.Tries)
	}
	return []model.Problem{warning(p.ing, "UpstreamConflict", "metadata.annotations",
		"service %s port %s is also the backend of an older Ingress with other service-upstream or proxy-next-upstream-tries: those apply (%s, %s)",
		mine.Service, mine.Port, members, tries)}
}
