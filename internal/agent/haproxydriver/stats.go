package haproxydriver

import (
	"context"
	"errors"
	"fmt"
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

// Stats returns what the driver counted for load balancer uuid and the
// members up as of the last RefreshMembers. It does no I/O.
func (d *Driver) Stats(uuid string) driver.Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	inst := d.lbs[uuid]
	if inst == nil {
		return driver.Stats{}
	}
	s := inst.stats
	if inst.result != nil {
		s.Members = len(inst.result.Members())
	}
	return s
}

// RefreshMembers asks HAProxy which members of the load balancers uuids
// are up: one `show servers state <backend>` per backend, over one
// runtime API connection per process.
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
			c.inst.stats.MembersUp = c.up
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
	members []render.Server
	up      int
	known   bool // up was read (or follows from the state)
}

// readShardMembers reads the members up of counts, all load balancers of
// sh, over one connection.
func readShardMembers(ctx context.Context, sh *shard, counts []*memberCount, dropped prometheus.Counter) error {
	if !sh.proc.Running() {
		for _, c := range counts {
			c.up, c.known = 0, true
		}
		return nil
	}
	// show info first: its DroppedLogs are the access-log lines this
	// process could not send (accesslog).
	lines := []string{"show info"}
	owners := []*memberCount{nil} // owners[i] asked lines[i]
	for _, c := range counts {
		if len(c.members) == 0 {
			c.up, c.known = 0, true
			continue
		}
		cmds, err := c.result.MembersStateCommands()
		if err != nil {
			return err
		}
		for _, cmd := range cmds {
			lines = append(lines, cmd.String())
			owners = append(owners, c)
		}
	}
	answers := make(map[*memberCount]*strings.Builder, len(counts))
	next := 0
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout(len(lines)))
	defer cancel()
	var info string
	err := sh.proc.RuntimeBatch(ctx, sh.at.Socket(), lines, func(_, answer string) error {
		c := owners[next]
		next++
		if c == nil {
			info = answer
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
	for c, b := range answers {
		c.up, c.known = membersUp(b.String(), c.members), true
	}
	sh.countDropped(info, dropped)
	return nil
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

// membersUp counts the servers of members that `show servers state`
// reports RUNNING. Its lines (format 1) are
//
//	be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
//
// after a version line and a "#" header; the process may serve other
// backends too, which are not counted.
func membersUp(answer string, members []render.Server) int {
	want := make(map[render.Server]bool, len(members))
	for _, m := range members {
		want[m] = true
	}
	up := 0
	var f [6]string // the fields read: be_id to srv_op_state
	for line := range strings.Lines(answer) {
		// Six of a line's two dozen fields, without a slice of them all:
		// membersUp reads every server of thousands of backends.
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
		if want[render.Server{Backend: f[1], Name: f[3]}] && f[5] == srvOpRunning {
			up++
		}
	}
	return up
}
