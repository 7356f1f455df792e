package process

import (
	"regexp"
	"strconv"
)

// FDShortfall is what HAProxy said when its config needed more file
// descriptors than the process may open (RLIMIT_NOFILE's hard limit).
// With `no strict-limits` (render's global section) HAProxy then runs
// within the limit instead of refusing the config: every load balancer
// keeps serving, and connections beyond the limit wait or are refused.
type FDShortfall struct {
	Needed int // descriptors the config asks for: 2 × maxconn, listeners, checks
	Limit  int // what the process got
}

// fdLimitWarning is HAProxy 2.6's and 3.0's warning (or, under
// strict-limits, alert) when setrlimit fails:
// "[haproxy.main()] Cannot raise FD limit to 21907, limit is 20000."
var fdLimitWarning = regexp.MustCompile(`Cannot raise FD limit to ([0-9]+), limit is ([0-9]+)`)

// parseFDShortfall returns the last shortfall HAProxy reported in out.
func parseFDShortfall(out string) (FDShortfall, bool) {
	all := fdLimitWarning.FindAllStringSubmatch(out, -1)
	if len(all) == 0 {
		return FDShortfall{}, false
	}
	last := all[len(all)-1]
	needed, err1 := strconv.Atoi(last[1])
	limit, err2 := strconv.Atoi(last[2])
	if err1 != nil || err2 != nil {
		return FDShortfall{}, false
	}
	return FDShortfall{Needed: needed, Limit: limit}, true
}

// noteFDLimit records what the master said while it loaded its config
// (output since the start or reload) and logs a change: a shortfall
// that appears is a warning an operator has to act on, one that goes
// away is good news.
func (i *Instance) noteFDLimit(out string) {
	now, short := parseFDShortfall(out)
	if !short {
		now = FDShortfall{}
	}
	was := i.fdShortfall.Swap(&now)
	switch {
	case short && (was == nil || *was != now):
		i.log.Warn("haproxy needs more file descriptors than this process may open; it runs within the limit, and connections beyond it wait or are refused: raise RLIMIT_NOFILE (LimitNOFILE of containerd or the pier service), or lower --haproxy-maxconn or --server-slots, or spread load balancers over more --haproxy-processes",
			"fd_needed", now.Needed, "fd_limit", now.Limit)
	case !short && was != nil && *was != (FDShortfall{}):
		i.log.Info("haproxy's file descriptor needs fit the limit again", "fd_needed_before", was.Needed, "fd_limit_before", was.Limit)
	}
}

// FDShortfall returns what the last start or reload reported; ok is
// false when the config fitted the limit.
func (i *Instance) FDShortfall() (FDShortfall, bool) {
	s := i.fdShortfall.Load()
	if s == nil || *s == (FDShortfall{}) {
		return FDShortfall{}, false
	}
	return *s, true
}
