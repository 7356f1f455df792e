package haproxydriver

import "sync"

// A lane serialises the work on one HAProxy process: its file list, its
// reloads and runtime updates, and the instances of the load balancers
// it runs. Applies in different lanes run at once, so a load balancer
// that takes long to apply (10,000 paths: about 1.5 s of render, check
// and reload) holds up only the load balancers of its own process: none
// with one process per load balancer, the others of its shard with
// --haproxy-processes.
//
// Lanes live in Driver.lanes while someone holds or waits for them; the
// count lets the last one out remove the entry, so the map does not grow
// with every load balancer that ever ran here.
type lane struct {
	mu    sync.Mutex
	users int // holders and waiters; guarded by Driver.mu
}

// enterLane waits for the lane of process folder dir and returns the
// function that leaves it.
func (d *Driver) enterLane(dir string) (leave func()) {
	d.mu.Lock()
	l := d.lanes[dir]
	if l == nil {
		l = &lane{}
		d.lanes[dir] = l
	}
	l.users++
	d.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		d.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(d.lanes, dir)
		}
		d.mu.Unlock()
	}
}
