// Package nativedriver is the agent's driver for the native provider
// (Services of type LoadBalancer): L4 load balancing in the kernel with
// nftables, the seed's ECMP load balancer. It keeps one table, inet
// pier_native (package nft renders it), holding every native load
// balancer placed on this node. Each change is one `nft -f -`
// transaction that changes only what differs (the first one after a start
// re-creates the table whole): re-creating it at every change let about
// one new connection in 10,000 through without DNAT while endpoints
// changed. Conntrack keeps established connections on the endpoint they
// started with.
//
// Its folder, below the agent's state folder:
//
//	native/<uuid>.json   the spec of each load balancer it serves
//
// The files let a restarted agent rebuild the table without the load
// balancers no longer placed here (Recover) and without disturbing the
// others: the table it writes is the one that runs.
//
// Addresses: the driver does not put the VIP or FIP on an interface; the
// address holder (addrhold, keepalived) does, exactly as for HAProxy. New
// connections to them are DNATed to an endpoint and masqueraded, so that
// replies come back through this node whatever the pods' routes are (the
// price: pods see this node's address, not the client's; see
// docs/operations.md, externalTrafficPolicy). The node must forward IPv4
// (net.ipv4.ip_forward=1) for endpoints on other hosts.
package nativedriver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/internal/nft"
)

// Config configures a Driver.
type Config struct {
	// StateDir is the agent's state folder; the driver keeps its files in
	// StateDir/native.
	StateDir string
	// Netns is the network namespace of this node's data plane (pier run
	// --nodes, tests); empty for the agent's own.
	Netns string
	// Binary is nft; default "nft" from PATH.
	Binary string
	Logger *slog.Logger
}

// Driver runs the native load balancers of this node.
type Driver struct {
	cfg   Config
	state *state

	mu sync.Mutex
	// lbs holds what the table serves, by UUID.
	lbs map[string][]nft.Service
	// hashes are the ConfigHash of each load balancer in lbs.
	hashes map[string]string
	// applies counts transactions, for Stats.
	applies map[string]uint64
	// known says lbs is what the kernel's table holds, so a transaction
	// changes only what differs (package nft, Render); until the first
	// commit the table is re-created whole.
	known bool
}

var _ driver.Driver = (*Driver)(nil)

// New returns a driver. It checks that nft can run.
func New(cfg Config) (*Driver, error) {
	if cfg.Binary == "" {
		cfg.Binary = "nft"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("native provider needs nftables (apt-get install nftables): %w", err)
	}
	st, err := newState(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	// A read-only call says now, not at the first Service, whether this
	// process may program nftables (root or CAP_NET_ADMIN).
	if out, err := nftCmd(context.Background(), cfg, "list", "tables").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("native provider needs root or CAP_NET_ADMIN for nftables: nft list tables: %w: %s",
			err, oneLine(out))
	}
	d := &Driver{cfg: cfg, state: st, lbs: map[string][]nft.Service{},
		hashes: map[string]string{}, applies: map[string]uint64{}}
	return d, nil
}

// Provider implements driver.Driver.
func (d *Driver) Provider() model.Provider { return model.ProviderNative }

// Recover loads the specs a previous agent served, forgets those not
// placed here and writes the table of the others, which replaces what ran
// with the same rules for them.
func (d *Driver) Recover(ctx context.Context, placed map[string]bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	specs, err := d.state.load()
	if err != nil {
		return err
	}
	if len(specs) == 0 && !d.tableExists(ctx) {
		return nil // nothing to recover: write nothing until a Service comes
	}
	next := map[string][]nft.Service{}
	for _, lb := range specs {
		if !placed[lb.UUID] {
			d.cfg.Logger.Info("native: stopping a load balancer no longer placed here", "uuid", lb.UUID, "lb", lb.Name)
			continue
		}
		svcs, err := services(lb)
		if err != nil {
			d.cfg.Logger.Warn("native: a saved spec cannot be served; the next apply replaces it", "uuid", lb.UUID, "error", err)
			continue
		}
		next[lb.UUID] = svcs
	}
	if err := d.commit(ctx, next); err != nil {
		return err
	}
	for _, lb := range specs {
		if next[lb.UUID] == nil {
			d.state.remove(lb.UUID)
		}
	}
	return nil
}

// Apply implements driver.Driver.
func (d *Driver) Apply(ctx context.Context, lb *model.LoadBalancer) (driver.Applied, error) {
	if !validUUID(lb.UUID) {
		return driver.Applied{}, reject("uuid %q", lb.UUID)
	}
	svcs, err := services(lb)
	if err != nil {
		return driver.Applied{}, fmt.Errorf("native %s: %w", lb.Name, err)
	}
	hash, err := configHash(svcs)
	if err != nil {
		return driver.Applied{}, fmt.Errorf("native %s: %w: %w", lb.Name, driver.ErrRejected, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hashes[lb.UUID] == hash {
		return driver.Applied{ConfigHash: hash}, nil
	}
	next := clone(d.lbs)
	next[lb.UUID] = svcs
	if err := d.commit(ctx, next); err != nil {
		return driver.Applied{}, fmt.Errorf("native %s: %w", lb.Name, err)
	}
	d.applies[lb.UUID]++
	if err := d.state.save(lb); err != nil {
		// The table serves the spec; only a restart would miss it.
		d.cfg.Logger.Warn("native: save spec", "uuid", lb.UUID, "error", err)
	}
	return driver.Applied{ConfigHash: hash}, nil
}

// Drifted implements driver.Driver. Nothing restarts a kernel table
// behind our back; an operator flushing it is repaired at the next
// apply.
func (d *Driver) Drifted() []string { return nil }

// Remove implements driver.Driver: the table is written without uuid.
// nft takes a few milliseconds, so it runs at once.
func (d *Driver) Remove(uuid string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.lbs[uuid]; !ok {
		d.state.remove(uuid)
		return
	}
	next := clone(d.lbs)
	delete(next, uuid)
	if err := d.commit(context.Background(), next); err != nil {
		d.cfg.Logger.Error("native: remove", "uuid", uuid, "error", err)
		return
	}
	d.state.remove(uuid)
	delete(d.applies, uuid)
}

// Close implements driver.Driver. With stop the table is deleted and the
// files removed; without, the table keeps serving for the next agent.
func (d *Driver) Close(stop bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !stop {
		return nil
	}
	var stopped []string
	for uuid := range d.lbs {
		stopped = append(stopped, uuid)
	}
	slices.Sort(stopped)
	if err := d.commit(context.Background(), map[string][]nft.Service{}); err != nil {
		d.cfg.Logger.Error("native: delete table", "error", err)
		return nil
	}
	for _, uuid := range stopped {
		d.state.remove(uuid)
	}
	return stopped
}

// Healthy implements driver.HealthChecker: the kernel serves what the
// last transaction committed, with no process that could die.
func (d *Driver) Healthy(uuid string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.lbs[uuid]
	return ok
}

// Stats implements driver.Reporter: every change is one transaction,
// counted as a runtime update (no process reloads).
func (d *Driver) Stats(uuid string) driver.Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := driver.Stats{RuntimeUpdates: d.applies[uuid]}
	for _, s := range d.lbs[uuid] {
		st.Members += len(s.Backends)
	}
	st.MembersUp = st.Members // endpoints are the ready ones; no health checks here
	return st
}

// RefreshMembers implements driver.Reporter; members are not checked.
func (d *Driver) RefreshMembers(context.Context, []string) error { return nil }

// commit writes the table serving next and, when nft took it, makes it
// the driver's view.
func (d *Driver) commit(ctx context.Context, next map[string][]nft.Service) error {
	var all []nft.Service
	for _, svcs := range next {
		all = append(all, svcs...)
	}
	var prev []nft.Service // nil: the table is re-created whole
	if d.known {
		for _, svcs := range d.lbs {
			prev = append(prev, svcs...)
		}
	}
	text, running, err := nft.Render(prev, all)
	if err != nil {
		return fmt.Errorf("%w: %w", driver.ErrRejected, err)
	}
	if len(text) > 0 {
		if err := d.run(ctx, text); err != nil {
			return err
		}
	}
	owner := map[string]string{}
	for uuid, svcs := range next {
		for _, s := range svcs {
			owner[s.ID] = uuid
		}
	}
	d.lbs = map[string][]nft.Service{}
	for uuid := range next {
		d.lbs[uuid] = nil // a load balancer with no listener is served too
	}
	for _, s := range running {
		d.lbs[owner[s.ID]] = append(d.lbs[owner[s.ID]], s)
	}
	d.known = len(running) > 0
	d.hashes = map[string]string{}
	for uuid, svcs := range next {
		d.hashes[uuid], _ = configHash(svcs)
	}
	return nil
}

// run hands text to nft as one transaction, inside the node's namespace
// when there is one.
func (d *Driver) run(ctx context.Context, text []byte) error {
	cmd := nftCmd(ctx, d.cfg, "-f", "-")
	cmd.Stdin = bytes.NewReader(text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if _, exit := err.(*exec.ExitError); exit {
			return fmt.Errorf("%w: %w: %w: %s", driver.ErrRejected, errNft, err, oneLine(stderr.Bytes()))
		}
		return fmt.Errorf("run nft: %w", err)
	}
	return nil
}

// oneLine joins nft's message lines, for one-line reports and logs.
func oneLine(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// nftCmd is nft with args, in the node's namespace when there is one.
func nftCmd(ctx context.Context, cfg Config, args ...string) *exec.Cmd {
	return netnsdo.Command(ctx, cfg.Netns, cfg.Binary, args...)
}

// tableExists reports whether pier's table is in the kernel.
func (d *Driver) tableExists(ctx context.Context) bool {
	return nftCmd(ctx, d.cfg, "list", "table", "inet", "pier_native").Run() == nil
}

// configHash names what the table serves for one load balancer: its
// rendering alone, so it does not change when another one does.
func configHash(svcs []nft.Service) (string, error) {
	text, _, err := nft.Render(nil, svcs)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:8]), nil
}

func clone(m map[string][]nft.Service) map[string][]nft.Service {
	out := make(map[string][]nft.Service, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
