package accesslog

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"pier.dev/pier/internal/model"
)

// Recent errors. Each load balancer keeps its last model.MaxRecentErrors
// kinds of 5xx answer, for its status (the web view, pier get): which
// route fails, since when, how often, answered by which member.
//
// Only 5xx: a 4xx is the client's error by HTTP's own definition, and on
// a public address scanners' 404s and clients' 401s arrive all the time;
// they would push the 5xx out of a short list, and the error share the
// status reports beside it is of 5xx. The 4xx are in the metrics
// (status="4xx") and the access log.
//
// Requests of one kind (route, status, member, termination state) are
// counted in one entry, which keeps its first time: a route failing a
// thousand times a second is one entry, not the whole list, and says
// since when. The list holds the kinds most recently seen; a new kind
// takes the place of the one least recently seen.

// errorKey is what makes two error answers the same kind.
type errorKey struct {
	namespace, route, service, port string
	status                          int
	member, term                    string
}

// errorRing is one load balancer's recent errors, newest first. The
// reading goroutine adds; the agent's reports read.
type errorRing struct {
	mu      sync.Mutex
	entries []model.RequestError
	keys    []errorKey
}

// isError says whether a status goes into the list.
func isError(status int) bool { return status >= 500 && status < 600 }

// add counts e (one request, Bounded) as of kind k.
func (g *errorRing) add(k errorKey, e model.RequestError) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := 0
	for i < len(g.keys) && g.keys[i] != k {
		i++
	}
	switch {
	case i < len(g.keys):
		old := g.entries[i]
		first := old.First
		if e.Last.Before(first) {
			first = e.Last
		}
		if e.Last.Before(old.Last) {
			// A line older than the newest counted, arriving after it:
			// the shards and the landing of a node are separate HAProxy
			// processes, whose lines reach the reader in either order.
			// It is counted, and the entry keeps showing the newest
			// request (what the web view says it shows).
			e = old
		}
		e.First, e.Count = first, old.Count+1
	case len(g.keys) < model.MaxRecentErrors:
		g.keys, g.entries = append(g.keys, errorKey{}), append(g.entries, model.RequestError{})
		e.First, e.Count = e.Last, 1
	default: // full: the last place is the kind least recently seen
		i = len(g.keys) - 1
		e.First, e.Count = e.Last, 1
	}
	// Move to the front: entries stay ordered by when they were last seen.
	copy(g.keys[1:i+1], g.keys[:i])
	copy(g.entries[1:i+1], g.entries[:i])
	g.keys[0], g.entries[0] = k, e
}

// list is a copy of the entries, newest first; nil when there are none.
func (g *errorRing) list() []model.RequestError {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.entries) == 0 {
		return nil
	}
	return append([]model.RequestError(nil), g.entries...)
}

// errorOf is the error answer of a line, and its kind.
func errorOf(in *wire, r *route, line *Line) (errorKey, model.RequestError) {
	e := model.RequestError{Last: timeAt(in.Time), Count: 1, Status: in.Status,
		Method: line.Method, Host: line.Host, Path: line.Path,
		Namespace: r.namespace, Route: r.ingress, RouteKind: r.kind, Service: r.service, ServicePort: r.port,
		Member: line.Member, Pod: line.Pod, TerminationState: in.Term, RequestID: line.RequestID}.Bounded()
	e.First = e.Last
	return errorKey{namespace: r.namespace, route: r.ingress, service: r.service, port: r.port,
		status: in.Status, member: line.Member, term: in.Term}, e
}

// RecentErrors are load balancer uuid's recent 5xx kinds, newest first,
// from the lines received since the agent started (whether written,
// sampled or off); nil when there were none or it is not known here.
func (l *Log) RecentErrors(uuid string) []model.RequestError {
	l.mu.RLock()
	info := l.lbs[uuid]
	l.mu.RUnlock()
	if info == nil {
		return nil
	}
	return info.errors.list()
}

// timeAt is HAProxy's "seconds.milliseconds"; the zero time when it is
// not one.
func timeAt(n json.Number) time.Time {
	sec, frac, _ := cutDot(string(n))
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	ms, _ := strconv.Atoi(frac)
	return time.Unix(s, int64(ms)*int64(time.Millisecond)).UTC()
}
