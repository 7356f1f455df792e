package haproxydriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/haproxy/render"
)

var _ driver.Reporter = (*Driver)(nil)

// refreshTimeout bounds the member reads of one process: a second, and a
// millisecond more per `show servers state` asked (each answers in well
// under one), so that a process of thousands of load balancers is read
// whole.
func refreshTimeout(commands int) time.Duration {
	return time.Second + time.Duration(commands)*time.Millisecond
}

// Stats returns what the driver counted for load balancer uuid, the
// members up as of the last RefreshMembers, and its recent 5xx from the
// access-log lines. It does no I/O.
func (d *Driver) Stats(uuid string) driver.Stats {
	s, ok := d.counts(uuid)
	if ok && d.accessLog != nil {
		s.RecentErrors = d.accessLog.RecentErrors(uuid)
	}
	return s
}

// counts are the numbers Stats reads under the driver's lock.
func (d *Driver) counts(uuid string) (driver.Stats, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	inst := d.lbs[uuid]
	if inst == nil {
		return driver.Stats{}, false
	}
	s := inst.stats
	if inst.result != nil {
		s.Members = len(inst.result.Members())
	}
	return s, true
}

// RefreshMembers asks HAProxy which members of the load balancers uuids
// are up, and how many requests their listeners took: one `show servers
// state <backend>` per backend and one `show stat <frontend>` per HTTP
// frontend, over one runtime API connection per process.
//
//   - Asking for their own backends keeps the answers small when a
//     process runs hundreds of load balancers (a shard): the whole
//     process's list made a cold start of 1,000 load balancers in 4
//     shards take 29 s instead of 5.
//   - One connection per process, not per load balancer: a node of 1,000
//     load balancers re-reads 100 a second, and each dial cost more than
//     its answer.
//
// A HAProxy that does not run has none up. A process whose read fails
// leaves its load balancers' last numbers, and the error says which.
// It may run beside Apply: a count read against a result that an apply
// replaced meanwhile is dropped (the apply reads its own).
func (d *Driver) RefreshMembers(ctx context.Context, uuids []string) error {
	var (
		counts []*memberCount
		asks   = map[*shard][]*memberCount{}
		order  []*shard // the shards in the order first asked, for a steady order of reads
	)
	d.mu.Lock()
	for _, uuid := range uuids {
		inst := d.lbs[uuid]
		if inst == nil || inst.result == nil {
			continue
		}
		c := &memberCount{inst: inst, result: inst.result, members: inst.result.Members()}
		counts = append(counts, c)
		if inst.landed {
			// The landing's servers have no health checks (render.Landable):
			// every member is up, and the shard does not know them yet.
			c.up, c.known = len(c.members), true
			continue
		}
		if len(asks[inst.sh]) == 0 {
			order = append(order, inst.sh)
		}
		asks[inst.sh] = append(asks[inst.sh], c)
	}
	d.mu.Unlock()
	var errs []error
	for _, sh := range order {
		if err := readShardMembers(ctx, sh, asks[sh], d.cfg.Metrics.AccessLogDropped); err != nil {
			errs = append(errs, fmt.Errorf("process %s: %w", sh.at.Dir, err))
		}
	}
	d.mu.Lock()
	for _, c := range counts {
		if c.known && c.inst.result == c.result {
			c.inst.stats.MembersUp, c.inst.stats.MembersDown = c.up, c.down
		}
		if c.requests != nil {
			c.inst.countRequests(c.generation, c.requests)
		}
	}
	d.mu.Unlock()
	return errors.Join(errs...)
}

// memberCount is one load balancer's part of RefreshMembers: the result
// it read the members of, and what it found.
type memberCount struct {
	inst    *instance
	result  *render.Result
	members []render.Member
	up      int
	down    []string
	known   bool // up was read (or follows from the state)
	// requests are the counters of its frontends, by name, as read from
	// the process of generation (nil: not read).
	requests   map[string]frontendCounters
	generation uint64
}

// frontendCounters are one frontend's request counters in one process.
type frontendCounters struct{ requests, errors5xx uint64 }

// requestBaseline is what the last read of an instance's counters saw:
// the process generation (a reload or restart starts a new worker at
// zero) and each frontend's counters.
type requestBaseline struct {
	generation uint64
	frontends  map[string]frontendCounters
}

// countRequests adds what the frontends took since the baseline to the
// instance's totals. The first read only sets the baseline: an adopted
// process's counters began before this driver. In a new generation every
// frontend began at zero, so all it counts is new; so is a frontend the
// baseline did not have.
func (i *instance) countRequests(generation uint64, now map[string]frontendCounters) {
	if i.baseline.frontends != nil {
		for name, c := range now {
			was, ok := i.baseline.frontends[name]
			if generation != i.baseline.generation || !ok || c.requests < was.requests || c.errors5xx < was.errors5xx {
				was = frontendCounters{}
			}
			i.stats.Requests += c.requests - was.requests
			i.stats.Errors5xx += c.errors5xx - was.errors5xx
		}
	}
	i.baseline = requestBaseline{generation: generation, frontends: now}
}

// generation tells the worker generations of a process apart: it grows
// with every reload a new worker confirmed and every restart. A failed
// reload may or may not have left a new worker; the counters going down
// tell that one (countRequests).
func generation(sh *shard) uint64 {
	st := sh.proc.Stats()
	return st.ReloadsOK + st.Restarts
}

// runtimeAsk is one command of a shard's read and whose answer it is.
type runtimeAsk struct {
	count    *memberCount
	frontend string // "" for `show servers state`
}

// readShardMembers reads the members up and the request counters of
// counts, all load balancers of sh, and the process's dropped access-log
// lines, over one connection.
func readShardMembers(ctx context.Context, sh *shard, counts []*memberCount, dropped prometheus.Counter) error {
	if !sh.proc.Running() {
		for _, c := range counts {
			c.up, c.down, c.known = 0, downOf(c.members, nil), true
		}
		return nil
	}
	lines, asks, err := shardAsks(counts)
	if err != nil {
		return err
	}
	answers := make(map[*memberCount]*strings.Builder, len(counts))
	next := 0
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout(len(lines)))
	defer cancel()
	var info string
	gen := generation(sh)
	err = sh.proc.RuntimeBatch(ctx, sh.at.Socket(), lines, func(_, answer string) error {
		ask := asks[next]
		next++
		c := ask.count
		if c == nil {
			info = answer
			return nil
		}
		if ask.frontend != "" {
			if n, ok := frontendStat(answer); ok {
				if c.requests == nil {
					c.requests = map[string]frontendCounters{}
				}
				c.requests[ask.frontend] = n
			}
			return nil
		}
		b := answers[c]
		if b == nil {
			b = &strings.Builder{}
			answers[c] = b
		}
		b.WriteString(answer)
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		return fmt.Errorf("show servers state: %w", err)
	}
	if generation(sh) != gen {
		// A reload ran meanwhile: some counters may be the old worker's.
		for _, c := range counts {
			c.requests = nil
		}
	}
	for _, c := range counts {
		c.generation = gen
		if b := answers[c]; b != nil {
			running := serversRunning(b.String())
			c.up, c.down, c.known = upOf(c.members, running), downOf(c.members, running), true
		}
	}
	sh.countDropped(info, dropped)
	return nil
}

// shardAsks are the runtime commands of readShardMembers' one
// connection, and what each answer is of. A count without members needs
// no servers state: it is known, none up, at once.
func shardAsks(counts []*memberCount) ([]string, []runtimeAsk, error) {
	// show info first: its DroppedLogs are the access-log lines this
	// process could not send (accesslog).
	lines := []string{"show info"}
	asks := []runtimeAsk{{}} // asks[i] is lines[i]; the first, show info, is no load balancer's
	for _, c := range counts {
		cmds, err := c.result.FrontendStatCommands()
		if err != nil {
			return nil, nil, err
		}
		names := c.result.FrontendNames()
		for i, cmd := range cmds {
			lines = append(lines, cmd.String())
			asks = append(asks, runtimeAsk{count: c, frontend: names[i]})
		}
		if len(c.members) == 0 {
			c.up, c.known = 0, true
			continue
		}
		if cmds, err = c.result.MembersStateCommands(); err != nil {
			return nil, nil, err
		}
		for _, cmd := range cmds {
			lines = append(lines, cmd.String())
			asks = append(asks, runtimeAsk{count: c})
		}
	}
	return lines, asks, nil
}

// countDropped adds to dropped what the process's DroppedLogs grew by
// since the last read. A new worker (a reload: another Pid) counts from
// zero, and so does this agent's first read of a process, whose earlier
// drops it cannot tell from ones before a restart of the agent.
func (sh *shard) countDropped(info string, dropped prometheus.Counter) {
	pid, n, ok := droppedLogs(info)
	if !ok {
		return
	}
	sh.droppedMu.Lock()
	defer sh.droppedMu.Unlock()
	switch {
	case pid != sh.droppedPid:
		if sh.droppedPid != "" {
			dropped.Add(float64(n))
		}
		sh.droppedPid = pid
	case n > sh.dropped:
		dropped.Add(float64(n - sh.dropped))
	}
	sh.dropped = n
}

// droppedLogs reads Pid and DroppedLogs from a `show info` answer.
func droppedLogs(info string) (pid string, n uint64, ok bool) {
	var found bool
	for line := range strings.Lines(info) {
		k, v, cut := strings.Cut(strings.TrimSpace(line), ": ")
		switch {
		case !cut:
		case k == "Pid":
			pid = v
		case k == "DroppedLogs":
			var err error
			if n, err = strconv.ParseUint(v, 10, 64); err == nil {
				found = true
			}
		}
	}
	return pid, n, found && pid != ""
}

// srvOpRunning is srv_op_state RUNNING in `show servers state`; a server
// in maintenance or failing its checks reads STOPPED (0) or STARTING (1).
const srvOpRunning = "2"

// serversRunning reads the servers that `show servers state` reports
// RUNNING. Its lines (format 1) are
//
//	be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
//
// after a version line and a "#" header; the process may serve other
// backends too, which the callers do not ask about.
func serversRunning(answer string) map[render.Server]bool {
	running := map[render.Server]bool{}
	var f [6]string // the fields read: be_id to srv_op_state
	for line := range strings.Lines(answer) {
		// Six of a line's two dozen fields, without a slice of them all:
		// this reads every server of thousands of backends.
		n := 0
		for field := range strings.FieldsSeq(line) {
			f[n] = field
			if n++; n == len(f) {
				break
			}
		}
		if n < len(f) || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[5] == srvOpRunning {
			running[render.Server{Backend: f[1], Name: f[3]}] = true
		}
	}
	return running
}

// upOf counts the servers of members that are running.
func upOf(members []render.Member, running map[render.Server]bool) int {
	up := 0
	for _, m := range members {
		if running[m.Server] {
			up++
		}
	}
	return up
}

// downOf lists the members (address:port) of the servers that are not
// running, sorted, once each (one endpoint in two pools is one member).
func downOf(members []render.Member, running map[render.Server]bool) []string {
	var out []string
	for _, m := range members {
		if !running[m.Server] {
			out = append(out, m.Addr.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// frontendStat reads a frontend's HTTP requests and 5xx responses from
// `show stat <frontend> 1 -1`: a "# pxname,svname,..." header naming the
// CSV fields, then the FRONTEND line. Fields are found by name, so
// HAProxy versions that add fields read the same.
func frontendStat(answer string) (frontendCounters, bool) {
	var header []string
	for line := range strings.Lines(answer) {
		line = strings.TrimRight(line, "\r\n")
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			header = strings.Split(rest, ",")
			continue
		}
		fields := strings.Split(line, ",")
		if header == nil || len(fields) < 2 || fields[1] != "FRONTEND" {
			continue
		}
		var out frontendCounters
		var found int
		for i, name := range header {
			if i >= len(fields) {
				break
			}
			switch name {
			case "req_tot":
				out.requests, found = parseCounter(fields[i]), found+1
			case "hrsp_5xx":
				out.errors5xx, found = parseCounter(fields[i]), found+1
			}
		}
		return out, found == 2
	}
	return frontendCounters{}, false
}

// parseCounter reads a CSV counter; an empty field (not applicable) is 0.
func parseCounter(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
