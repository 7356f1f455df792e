package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// errRejected marks a config that haproxy -c refused: retrying the same
// spec cannot help, the next spec change will.
var errRejected = errors.New("haproxy -c rejected the rendered config")

// instance is one LoadBalancer running on this node.
type instance struct {
	dir        string
	proc       *process.Instance
	applied    *model.LoadBalancer // the spec HAProxy runs now
	configHash string
	orphan     bool   // left by a previous agent for a load balancer that is gone
	restarts   uint64 // supervisor restarts already accounted for by a reload
	counted    uint64 // supervisor restarts already counted in metrics
}

// restarted reports whether the supervisor restarted HAProxy since the
// last apply.
func (i *instance) restarted() bool { return i.proc.Stats().Restarts != i.restarts }

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// lbDir returns the LoadBalancer's folder. UUIDs are ours, but the store
// may be shared (a custom resource): check the shape and that the joined
// path stays where it belongs (RELIABILITY R2, ingress-nginx #13068).
func (a *Agent) lbDir(uuid string) (string, error) {
	if !uuidPattern.MatchString(uuid) {
		return "", fmt.Errorf("load balancer uuid %q is not a UUID", uuid)
	}
	base := filepath.Join(a.cfg.StateDir, "haproxy")
	dir := filepath.Join(base, uuid)
	if filepath.Dir(dir) != base || filepath.Base(dir) != uuid {
		return "", fmt.Errorf("load balancer uuid %q escapes %s", uuid, base)
	}
	return dir, nil
}

// apply brings one LoadBalancer to its spec on this node.
func (a *Agent) apply(ctx context.Context, lb *model.LoadBalancer) error {
	dir, err := a.lbDir(lb.UUID)
	if err != nil {
		return err
	}
	if done, ok := a.stopping[lb.UUID]; ok {
		<-done // a stop of the previous incarnation must finish first
		delete(a.stopping, lb.UUID)
	}
	inst := a.lbs[lb.UUID]
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	opts := a.cfg.Render
	opts.Dir = dir
	certsChanged, err := a.writeCertificates(lb, dir)
	if err != nil {
		return err
	}
	cfg, err := render.Config(lb, opts)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	// Certificate files keep their names when a Secret rotates: their
	// content is part of what runs, so it is part of the hash.
	hash := hashOf(append(cfg, certificateDigests(lb)...))
	if inst != nil && inst.configHash == hash && inst.proc.Running() && !inst.restarted() {
		inst.applied = lb
		a.report(context.WithoutCancel(ctx), lb, model.StateActive, hash, "")
		return nil
	}
	if err := a.writeFiles(dir, cfg, lb, opts); err != nil {
		return err
	}
	if inst == nil {
		inst, err = a.startInstance(ctx, lb, dir, certsChanged)
		if inst != nil {
			// Running (adopted) even if bringing it up to date failed: the
			// next attempt must reload this instance, not adopt it again.
			a.lbs[lb.UUID] = inst
		}
	} else {
		err = a.update(ctx, inst, lb, opts)
	}
	if errors.Is(err, process.ErrCheckFailed) {
		a.cfg.Metrics.ConfigRejected.Inc()
		err = fmt.Errorf("%w: %v", errRejected, err)
	}
	if err != nil {
		return err
	}
	inst.applied, inst.configHash = lb, hash
	inst.restarts = inst.proc.Stats().Restarts
	a.lbs[lb.UUID] = inst
	a.report(context.WithoutCancel(ctx), lb, model.StateActive, hash, "")
	return nil
}

// writeFiles writes the crt-list and haproxy.conf. HAProxy never reads
// these directly: the process package copies them, checks the copy with
// `haproxy -c` and only then loads it, so a file HAProxy would refuse is
// never where a restart picks it up (RELIABILITY 3.3).
func (a *Agent) writeFiles(dir string, cfg []byte, lb *model.LoadBalancer, opts render.Options) error {
	crt, err := render.CrtList(lb, opts)
	if err != nil {
		return fmt.Errorf("render crt-list: %w", err)
	}
	if err := writeIfChanged(render.CrtListPath(dir), crt, 0o600); err != nil {
		return err
	}
	return writeIfChanged(filepath.Join(dir, "haproxy.conf"), cfg, 0o600)
}

// startInstance starts HAProxy, or adopts the one a previous agent left
// running. An adopted HAProxy is reloaded only if the config it runs
// differs from the one just written.
func (a *Agent) startInstance(ctx context.Context, lb *model.LoadBalancer, dir string, certsChanged bool) (*instance, error) {
	proc := process.New(process.Config{
		Binary:      a.cfg.HAProxyBinary,
		Dir:         dir,
		ConfigFiles: []string{filepath.Join(dir, "haproxy.conf")},
		Logger:      a.cfg.Logger.With("lb", lb.Name, "uuid", lb.UUID),
	})
	if err := proc.Start(ctx); err != nil {
		a.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	inst := &instance{dir: dir, proc: proc}
	if !proc.Adopted() {
		a.cfg.Metrics.Reloads.WithLabelValues("started").Inc()
		a.cfg.Logger.Info("haproxy running", "lb", lb.Name, "uuid", lb.UUID, "vip", lb.VIP, "fip", lb.FIP, "dir", dir)
		return inst, nil
	}
	changed, err := proc.ConfigChanged()
	if err == nil && !changed && !certsChanged {
		a.cfg.Logger.Info("adopted running haproxy; config unchanged, no reload", "lb", lb.Name, "uuid", lb.UUID)
		return inst, nil
	}
	// Start adopted a master that a previous agent left running with an
	// older config: bring it up to date.
	if err := proc.Reload(ctx); err != nil {
		a.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return inst, fmt.Errorf("reload adopted haproxy: %w", err)
	}
	a.cfg.Metrics.Reloads.WithLabelValues("ok").Inc()
	a.cfg.Logger.Info("adopted running haproxy and reloaded it: its config was older", "lb", lb.Name, "uuid", lb.UUID)
	return inst, nil
}

// update applies a new spec to a running HAProxy: through the runtime API
// when only members changed within the server slots, else by a reload.
func (a *Agent) update(ctx context.Context, inst *instance, lb *model.LoadBalancer, opts render.Options) error {
	plan, err := render.PlanUpdate(inst.applied, lb, opts)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if inst.restarted() {
		// The supervisor restarted HAProxy from the last config it loaded,
		// which may predate runtime updates: reload the current file.
		plan = render.Plan{Reload: true, Reason: "haproxy was restarted by its supervisor"}
	}
	if !plan.Reload {
		err := a.runtimeUpdate(ctx, inst, plan)
		if err == nil {
			a.cfg.Metrics.RuntimeUpdates.WithLabelValues("ok").Inc()
			a.cfg.Logger.Info("members updated without reload", "lb", lb.Name, "commands", len(plan.Commands))
			return nil
		}
		a.cfg.Metrics.RuntimeUpdates.WithLabelValues("failed").Inc()
		a.cfg.Logger.Warn("runtime update failed; reloading instead", "lb", lb.Name, "error", err)
		plan.Reason = "runtime API update failed"
	}
	if err := inst.proc.Reload(ctx); err != nil {
		a.cfg.Metrics.Reloads.WithLabelValues("failed").Inc()
		return fmt.Errorf("reload haproxy: %w", err)
	}
	a.cfg.Metrics.Reloads.WithLabelValues("ok").Inc()
	a.cfg.Logger.Info("haproxy reloaded", "lb", lb.Name, "uuid", lb.UUID, "reason", plan.Reason)
	return nil
}

func (a *Agent) runtimeUpdate(ctx context.Context, inst *instance, plan render.Plan) error {
	sock := render.SocketPath(inst.dir)
	for _, c := range plan.Commands {
		cmd := c.String()
		out, err := inst.proc.Runtime(ctx, sock, cmd)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		if msg := bytes.TrimSpace([]byte(out)); len(msg) > 0 && !runtimeOK(string(msg)) {
			return fmt.Errorf("%s: %s", cmd, msg)
		}
	}
	return nil
}

// runtimeOK tells a harmless answer from an error: `set server … addr`
// answers with a description of the change, other set commands answer
// nothing.
func runtimeOK(answer string) bool {
	return bytes.Contains([]byte(answer), []byte("changed from")) || bytes.Contains([]byte(answer), []byte("no need to change"))
}

// writeCertificates fetches each certificate's Secret, validates it again
// (the store may be older than the Secret), checks it is the version that
// translation accepted, and writes the canonical PEM with mode 0600.
func (a *Agent) writeCertificates(lb *model.LoadBalancer, dir string) (changed bool, err error) {
	for _, l := range lb.Listeners {
		for _, c := range l.Certificates {
			certPEM, keyPEM, err := a.cfg.Secrets.TLSPair(c.Namespace, c.Secret)
			if err != nil {
				return changed, fmt.Errorf("certificate %s/%s: %w", c.Namespace, c.Secret, err)
			}
			pair, err := tlscert.Parse(certPEM, keyPEM)
			if err != nil {
				return changed, fmt.Errorf("certificate %s/%s: %w", c.Namespace, c.Secret, err)
			}
			if pair.SHA256 != c.SHA256 {
				return changed, fmt.Errorf("certificate %s/%s changed since it was translated; waiting for the next update", c.Namespace, c.Secret)
			}
			path, err := render.CertPath(dir, c.ID)
			if err != nil {
				return changed, err
			}
			if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, pair.Combined()) {
				continue
			}
			if err := tlscert.WriteFile(path, pair); err != nil {
				return changed, fmt.Errorf("write certificate %s/%s: %w", c.Namespace, c.Secret, err)
			}
			changed = true
		}
	}
	return changed, nil
}

// certificateDigests lists the content hashes of every certificate.
func certificateDigests(lb *model.LoadBalancer) []byte {
	var out []byte
	for _, l := range lb.Listeners {
		for _, c := range l.Certificates {
			out = append(out, "\n# cert "+c.ID+" "+c.SHA256...)
		}
	}
	return out
}

// remove stops the LoadBalancer if it runs here and deletes its folder.
func (a *Agent) remove(uuid string) {
	a.stop(uuid, true)
	delete(a.retry, uuid)
	delete(a.failed, uuid)
}

// stop stops HAProxy gracefully in the background: draining may take up
// to hard-stop-after, and other LoadBalancers must not wait for it.
func (a *Agent) stop(uuid string, removeDir bool) {
	inst := a.lbs[uuid]
	if inst == nil {
		return
	}
	delete(a.lbs, uuid)
	done := make(chan struct{})
	a.stopping[uuid] = done
	a.stops.Add(1)
	go func() {
		defer a.stops.Done()
		defer close(done)
		stop := inst.proc.Stop
		if inst.orphan {
			stop = inst.proc.StopStale
		}
		if err := stop(context.Background()); err != nil {
			a.cfg.Logger.Warn("haproxy stop", "uuid", uuid, "error", err)
		}
		if removeDir {
			if err := os.RemoveAll(inst.dir); err != nil {
				a.cfg.Logger.Warn("remove load balancer folder", "dir", inst.dir, "error", err)
			}
		}
		a.cfg.Logger.Info("haproxy stopped", "uuid", uuid, "removed", removeDir)
	}()
}

func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("install %s: %w", path, err)
	}
	return nil
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// stopOrphans stops the HAProxy of every load-balancer folder that a
// previous agent left for a load balancer no longer placed here (deleted
// while no agent ran), and removes the folder. It runs before the first
// event, so a folder present now belongs to a previous incarnation.
func (a *Agent) stopOrphans(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(a.cfg.StateDir, "haproxy"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read load balancer folders: %w", err)
	}
	lbs, err := a.cfg.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("list load balancers: %w", err)
	}
	here := map[string]bool{}
	for _, lb := range lbs {
		here[lb.UUID] = a.placedHere(lb)
	}
	for _, e := range entries {
		uuid := e.Name()
		dir, err := a.lbDir(uuid)
		if err != nil || !e.IsDir() || here[uuid] {
			continue
		}
		a.cfg.Logger.Info("stopping haproxy of a load balancer that is gone", "uuid", uuid, "dir", dir)
		a.lbs[uuid] = &instance{dir: dir, orphan: true, proc: process.New(process.Config{
			Binary: a.cfg.HAProxyBinary, Dir: dir, Logger: a.cfg.Logger.With("uuid", uuid)})}
		a.stop(uuid, true)
	}
	return nil
}
