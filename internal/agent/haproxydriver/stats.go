package haproxydriver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/haproxy/render"
)

var _ driver.Reporter = (*Driver)(nil)

// refreshTimeout bounds one `show servers state`: it answers in about
// 1 ms, and the agent's loop waits for it.
const refreshTimeout = 500 * time.Millisecond

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

// RefreshMembers asks HAProxy which members of load balancer uuid are
// up: one `show servers state <backend>` per backend of the load
// balancer, over one runtime API connection. Asking for its own backends
// keeps the answer small when the process runs hundreds of load
// balancers (a shard): the whole process's list made a cold start of
// 1,000 load balancers in 4 shards take 29 s instead of 5. A HAProxy
// that does not run has none up.
func (d *Driver) RefreshMembers(ctx context.Context, uuid string) error {
	d.mu.Lock()
	inst := d.lbs[uuid]
	if inst == nil || inst.result == nil {
		d.mu.Unlock()
		return nil
	}
	result, sh, landed := inst.result, inst.sh, inst.landed
	d.mu.Unlock()
	members := result.Members()
	up := 0
	if landed {
		// The landing's servers have no health checks (render.Landable):
		// every member is up, and the shard does not know them yet.
		up = len(members)
	} else if sh.proc.Running() && len(members) > 0 {
		cmds, err := result.MembersStateCommands()
		if err != nil {
			return err
		}
		lines := make([]string, len(cmds))
		for i, c := range cmds {
			lines[i] = c.String()
		}
		ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
		defer cancel()
		var answers strings.Builder
		err = sh.proc.RuntimeBatch(ctx, sh.at.Socket(), lines, func(_, answer string) error {
			answers.WriteString(answer)
			answers.WriteByte('\n')
			return nil
		})
		if err != nil {
			return fmt.Errorf("show servers state: %w", err)
		}
		up = membersUp(answers.String(), members)
	}
	d.mu.Lock()
	inst.stats.MembersUp = up
	d.mu.Unlock()
	return nil
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
	for _, line := range strings.Split(answer, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if want[render.Server{Backend: f[1], Name: f[3]}] && f[5] == srvOpRunning {
			up++
		}
	}
	return up
}
