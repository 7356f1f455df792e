// Package lint is `pier lint`: for each Ingress of a snapshot, the
// verdict pier would give it — serves, serves with differences from
// ingress-nginx, refused, or not pier's — and why. It runs what
// `pier run` runs up to HAProxy and stops there: the same translation,
// the same IPAM and quotas (controller.Reconciler, into a store in a
// scratch folder), and, per load balancer, the agent's own render and
// `haproxy -c` (haproxydriver.Check). Nothing is served, no address is
// bound, no API server is written to.
package lint

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/gatewayapi"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
)

// Config is what the verdict depends on: the flags pier run or the
// controller would be started with.
type Config struct {
	Translate translate.Options
	// InternalPool and PublicPool are IPAM's pools (pier run's
	// --internal-pool and --public-pool); a pinned address outside them
	// is refused as it would be.
	InternalPool, PublicPool string
	Quota                    controller.Quota
	// HAProxy is the binary `haproxy -c` runs with; "" or one not found
	// renders every configuration but checks none (Report.HAProxy says
	// so).
	HAProxy string
	// Render and Processes are the agent's render options and
	// --haproxy-processes.
	Render    render.Options
	Processes int
	// Classes are IngressClass names to treat as pier's (an IngressClass
	// of that name in the snapshot is replaced): the verdict once those
	// classes are moved over to pier (--ingress-class).
	Classes []string
}

// Verdict is what pier does with one Ingress.
type Verdict string

const (
	Serves                Verdict = "serves"
	ServesWithDifferences Verdict = "serves with differences"
	Refused               Verdict = "refused"
	// NotOurs: the Ingress's class is not pier's; pier leaves it alone.
	NotOurs Verdict = "not pier's"
)

// Ingress is the verdict on one Ingress.
type Ingress struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Verdict   Verdict `json:"verdict"`
	// Reason says why it is refused or not pier's; empty otherwise.
	Reason string `json:"reason,omitempty"`
	// LoadBalancer is the name of the load balancer that serves it.
	LoadBalancer string `json:"loadBalancer,omitempty"`
	// Differences are what is served otherwise than ingress-nginx would
	// serve it: warnings, annotation differences, a host split.
	Differences []string `json:"differences,omitempty"`
	// Problems are every problem pier reports for it, as the API and
	// the Events carry them.
	Problems    []model.Problem              `json:"problems"`
	Annotations []translate.AnnotationReport `json:"annotations"`
}

// HostSplit is one host served by several load balancers, each with its
// own address.
type HostSplit struct {
	Host          string   `json:"host"`
	LoadBalancers []string `json:"loadBalancers"`
	Ingresses     []string `json:"ingresses"`
	// Advice says how to serve the host from one load balancer.
	Advice string `json:"advice"`
}

// Report is the verdict on every Ingress, in namespace/name order.
type Report struct {
	Ingresses  []Ingress   `json:"ingresses"`
	HostSplits []HostSplit `json:"hostSplits"`
	// HAProxy says which HAProxy checked the configurations, or why none
	// did.
	HAProxy string  `json:"haproxy"`
	Checked bool    `json:"haproxyChecked"`
	Summary Summary `json:"summary"`
}

// Summary counts the verdicts.
type Summary struct {
	Ingresses             int `json:"ingresses"`
	Serves                int `json:"serves"`
	ServesWithDifferences int `json:"servesWithDifferences"`
	Refused               int `json:"refused"`
	NotOurs               int `json:"notOurs"`
}

// Run gives the verdict on every Ingress of snap. The scratch folder it
// needs (a store, the rendered files) is removed before it returns.
func Run(ctx context.Context, snap *source.Snapshot, cfg Config) (*Report, error) {
	dir, err := os.MkdirTemp("", "pier-lint-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	snap = withClasses(snap, cfg.Classes, cfg.Translate.ControllerName)
	opts := cfg.Translate
	opts.Now = time.Now() // as the pipeline's rebuild: expired certificates are reported
	res := translate.Ingresses(snap, opts)
	res.Merge(translate.Services(snap, opts))
	res.Merge(gatewayapi.Translate(snap, opts))
	lbs, applied, err := reconcile(ctx, dir, res, cfg, logger)
	if err != nil {
		return nil, err
	}
	// What the reconciler refused is not served, as in the pipeline.
	res = res.Without(applied.Refused)
	ipamProblems := applied.Problems
	report := &Report{}
	binary, why := findHAProxy(cfg.HAProxy)
	report.HAProxy, report.Checked = why, binary != ""
	checks, err := check(ctx, dir, served(res, lbs), snap, binary, cfg, logger)
	if err != nil {
		return nil, err
	}
	problems := append(append([]model.Problem(nil), res.Problems...), ipamProblems...)
	report.Ingresses = verdicts(snap, res, problems, lbs, checks, cfg.Translate)
	report.HostSplits = hostSplits(snap, res, lbs, report.Ingresses)
	for _, ing := range report.Ingresses {
		report.Summary.Ingresses++
		switch ing.Verdict {
		case Serves:
			report.Summary.Serves++
		case ServesWithDifferences:
			report.Summary.ServesWithDifferences++
		case Refused:
			report.Summary.Refused++
		default:
			report.Summary.NotOurs++
		}
	}
	return report, nil
}

// lintNode is the one node load balancers are placed on, as pier run's.
var lintNode = source.Node{Name: "lint", Ready: true}

// reconcile gives the load balancers of res their addresses as the
// controller would, into a store in dir, and returns what it stored by
// UUID with what it refused.
func reconcile(ctx context.Context, dir string, res *translate.Result, cfg Config, logger *slog.Logger) (map[string]*model.LoadBalancer, controller.Outcome, error) {
	alloc, err := ipam.FromCIDRs(cfg.InternalPool, cfg.PublicPool)
	if err != nil {
		return nil, controller.Outcome{}, err
	}
	st, err := bolt.Open(filepath.Join(dir, "lint.db"))
	if err != nil {
		return nil, controller.Outcome{}, err
	}
	defer st.Close()
	r := &controller.Reconciler{Store: st, Index: controller.NewIndex(nil), IPAM: alloc, Quota: cfg.Quota, Logger: logger}
	applied, err := r.Apply(ctx, res, []source.Node{lintNode})
	if err != nil {
		return nil, controller.Outcome{}, fmt.Errorf("assign addresses: %w", err)
	}
	stored, err := st.List(ctx)
	if err != nil {
		return nil, controller.Outcome{}, err
	}
	out := make(map[string]*model.LoadBalancer, len(stored))
	for _, lb := range stored {
		out[lb.UUID] = lb
	}
	return out, applied, nil
}

// served is the HAProxy load balancers that serve an accepted Ingress.
func served(res *translate.Result, lbs map[string]*model.LoadBalancer) []*model.LoadBalancer {
	seen := map[string]bool{}
	var out []*model.LoadBalancer
	for ref, uuid := range res.Accepted {
		lb := lbs[uuid]
		if ref.Kind != model.KindIngress || lb == nil || seen[uuid] || lb.Provider != model.ProviderHAProxy {
			continue
		}
		seen[uuid] = true
		out = append(out, lb)
	}
	return out
}

// findHAProxy resolves the binary and says what checks the
// configurations; binary is "" when none can.
func findHAProxy(name string) (binary, what string) {
	if name == "" {
		return "", "haproxy -c not run (no binary given): configurations rendered, not checked"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Sprintf("haproxy -c not run: %s not found (install HAProxy 2.6 or later, or pass --haproxy PATH): configurations rendered, not checked", name)
	}
	out, err := exec.Command(path, "-v").Output()
	version := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	if err != nil || version == "" {
		version = "version unknown"
	}
	return path, fmt.Sprintf("haproxy -c run with %s (%s)", path, version)
}

// check renders each load balancer as its agent would and, when binary
// is set, checks it; it returns the error of each that failed, by UUID.
func check(ctx context.Context, dir string, lbs []*model.LoadBalancer, snap *source.Snapshot, binary string,
	cfg Config, logger *slog.Logger) (map[string]error, error) {
	d, err := haproxydriver.New(haproxydriver.Config{StateDir: filepath.Join(dir, "state"), Binary: binary,
		Render: cfg.Render, Secrets: snapshotSecrets{snap}, ConfigMaps: snapshotSecrets{snap}, Processes: cfg.Processes, Logger: logger})
	if err != nil {
		return nil, err
	}
	out := map[string]error{}
	for _, lb := range lbs {
		if err := d.Check(ctx, lb, binary != ""); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			out[lb.UUID] = err
		}
	}
	return out, nil
}
