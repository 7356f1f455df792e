package agent

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// stuckAfter is how long the agent's loop may go without a turn before
// Alive says it is stuck: the loop turns at least once a second (its
// ticker), and nothing it runs itself waits on a process or the network
// for longer than a few seconds.
const stuckAfter = 30 * time.Second

// probes is what the agent's liveness and readiness probes read. The
// loop writes it; the API server's goroutines read it.
type probes struct {
	// turnedAt is the Unix nanosecond of the loop's last turn; zero
	// until Run's loop starts.
	turnedAt atomic.Int64
	// notReady is why the node cannot take its share of traffic yet;
	// nil once it can.
	notReady atomic.Pointer[error]
}

func newProbes() *probes {
	p := &probes{}
	p.setReady(errors.New("starting: the load balancers placed here are not applied yet"))
	return p
}

func (p *probes) setReady(err error) {
	if err == nil {
		p.notReady.Store(nil)
		return
	}
	p.notReady.Store(&err)
}

// Alive is the liveness probe: the loop still turns. An error means a
// restart is the only cure.
func (a *Agent) Alive() error {
	at := a.probes.turnedAt.Load()
	if at == 0 {
		return nil // still recovering what runs; Ready says so
	}
	if since := time.Since(time.Unix(0, at)); since > stuckAfter {
		return fmt.Errorf("the agent's loop has not turned for %s", since.Round(time.Second))
	}
	return nil
}

// Ready is the readiness probe: this node could take over every load
// balancer placed on it now. A rolling update waits for it before it
// replaces the next node's agent, whose addresses would come here.
func (a *Agent) Ready() error {
	if err := a.probes.notReady.Load(); err != nil {
		return *err
	}
	return nil
}

// checkReady decides readiness from the loop's own state. A node is ready
// when every load balancer placed on it (active or standby) was applied
// with its current spec and its data plane is healthy, and the address
// mover works. A spec whose apply failed does not hold the node back: it
// failed with a reason in its status, and the node serves the others; a
// spec not yet tried, or being applied, does. Until the store has been
// listed (recover) nothing is known, and the node is not ready.
func (a *Agent) checkReady() error {
	if !a.recovered {
		return errors.New("starting: the load balancers placed here are not known yet")
	}
	var waiting, unhealthy []string
	for uuid, lb := range a.latest {
		if !lb.Placement.Has(a.cfg.Node) {
			continue
		}
		hash := lb.SpecHash()
		switch cur := a.applied[uuid]; {
		case a.failed[uuid] == hash:
		case cur == nil || cur.SpecHash() != hash:
			waiting = append(waiting, lb.Name)
		case !a.healthy(uuid):
			unhealthy = append(unhealthy, lb.Name)
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("%d load balancers placed here are not applied yet: %s", len(waiting), sample(waiting))
	}
	if len(unhealthy) > 0 {
		return fmt.Errorf("%d load balancers placed here do not serve: %s", len(unhealthy), sample(unhealthy))
	}
	if a.mover != nil {
		return a.mover.Ready()
	}
	return nil
}

// sample names a few of names, sorted, for a probe's answer.
func sample(names []string) string {
	const most = 5
	sort.Strings(names)
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}
