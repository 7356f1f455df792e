package haproxydriver

import (
	"context"
	"fmt"

	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// Check does for lb what Apply does before HAProxy loads it, and stops
// there: it writes the load balancer's certificates and files below the
// driver's state dir, renders its fragment and, when run is set, checks
// it with `haproxy -c` beside its process's global.conf and
// process.conf, as a fragment joining a shard is checked alone. It
// starts no HAProxy: pier lint gives with it the verdict an agent would.
// A configuration HAProxy refuses yields an error wrapping
// driver.ErrRejected, as Apply's.
func (d *Driver) Check(ctx context.Context, lb *model.LoadBalancer, run bool) error {
	at, err := d.layout.LB(lb.UUID)
	if err != nil {
		return err
	}
	if _, err := d.writeCertificates(lb, at); err != nil {
		return err
	}
	if _, err := d.writeUpstreamFiles(lb, at); err != nil {
		return err
	}
	if _, err := d.writeClientCAs(lb, at); err != nil {
		return err
	}
	opts := d.cfg.Render
	opts.Users = d.authUsers
	r, err := render.Render(lb, at, nil, opts)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	if err := writeFiles(at, at.Candidate(), r); err != nil {
		return err
	}
	pa := d.processFor(at)
	if err := d.writeProcessFiles(pa); err != nil {
		return err
	}
	if !run {
		return nil
	}
	if err := process.Check(ctx, d.cfg.Binary, []string{pa.Global, pa.Conf(), at.Candidate()}); err != nil {
		return d.rejected(err)
	}
	return nil
}
