package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/translate"
)

// share is a per-namespace quota flag: a count ("50"), or a share of
// the global cap or address pool it divides ("25%"), rounded up and at
// least 1; 0 is no quota. A share of nothing (no cap, no pool) is no
// quota either.
type share struct {
	n       int
	percent int // 1-100; 0: n is a count
}

func (s *share) String() string {
	if s.percent > 0 {
		return strconv.Itoa(s.percent) + "%"
	}
	return strconv.Itoa(s.n)
}

func (s *share) Set(v string) error {
	v = strings.TrimSpace(v)
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return fmt.Errorf("want a count or a share of 1%% to 100%%, got %q", v)
		}
		*s = share{percent: n}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("want a count (0: no quota) or a share such as 25%%, got %q", v)
	}
	*s = share{n: n}
	return nil
}

// of is the quota as a count, for a cap or pool of total.
func (s share) of(total uint64) int {
	if s.percent == 0 {
		return s.n
	}
	if total == 0 {
		return 0
	}
	total = min(total, 1<<40) // counts beyond are no bound anyway
	return int(max((total*uint64(s.percent)+99)/100, 1))
}

// Defaults of the quotas on shared pools and caps. A namespace may take
// a quarter of each address pool: pools are small where addresses are
// public (a /28 holds 14, of which a namespace then takes 4), and a
// tenant with more load balancers than that needs an operator's
// decision anyway. Of the caps on objects (--max-ingresses,
// --max-httproutes: 10,000) a namespace may take a tenth, 1,000, far
// more than one application's namespace holds, while ten namespaces
// must come together to fill the cap.
var (
	defaultPoolShare = share{percent: 25}
	defaultCapShare  = share{percent: 10}
)

// registerQuota adds the per-namespace quotas on the address pools.
func (p *poolFlags) registerQuota(fs *flag.FlagSet) {
	p.lbShare, p.fipShare = defaultPoolShare, defaultPoolShare
	fs.Var(&p.lbShare, "max-load-balancers-per-namespace",
		"refuse a new load balancer (QuotaExceeded) when its namespace (its first source's) already has this many: a count, or a share of --internal-pool's addresses (each load balancer takes a VIP), rounded up; 0: no quota")
	fs.Var(&p.fipShare, "max-public-ips-per-namespace",
		"refuse a new load balancer that would take a floating IP (QuotaExceeded) when its namespace already has this many: a count, or a share of --public-pool's addresses, rounded up, so that one namespace cannot drain the pool (its Gateways, Ingresses and Services together); 0: no quota")
}

// quotaFor resolves the quotas for the pools in use (pier run --nodes
// chooses the lab's after parsing). Lowering a quota never takes an
// address from a load balancer that has it.
func (p *poolFlags) quotaFor(internal, public string) (controller.Quota, error) {
	var q controller.Quota
	in, err := ipam.ParsePool("--internal-pool", internal)
	if err != nil {
		return q, err
	}
	q.LoadBalancers = p.lbShare.of(in.Size())
	if public != "" {
		pub, err := ipam.ParsePool("--public-pool", public)
		if err != nil {
			return q, err
		}
		q.PublicIPs = p.fipShare.of(pub.Size())
	} else if p.fipShare.percent == 0 {
		q.PublicIPs = p.fipShare.n // pinned floating IPs only
	}
	return q, nil
}

// registerQuota adds the per-namespace quotas on objects and the regex
// caps (translate.Options; quota.go and regexcap.go there).
func (t *translateFlags) registerQuota(fs *flag.FlagSet) {
	t.ingShare, t.routeShare = defaultCapShare, defaultCapShare
	fs.Var(&t.ingShare, "max-ingresses-per-namespace",
		"refuse a namespace's newest Ingresses (QuotaExceeded) past this many, so that one namespace cannot fill --max-ingresses for the others: a count, or a share of --max-ingresses, rounded up; 0: no quota")
	fs.Var(&t.routeShare, "max-httproutes-per-namespace",
		"refuse a namespace's newest HTTPRoutes and GRPCRoutes attached to pier's Gateways (Accepted=False, QuotaExceeded) past this many, so that one namespace cannot fill --max-httproutes for the others: a count, or a share of --max-httproutes, rounded up; 0: no quota")
	fs.IntVar(&t.opts.MaxGatewaysPerNamespace, "max-gateways-per-namespace", t.opts.MaxGatewaysPerNamespace,
		"refuse a namespace's newest Gateways of pier's classes (Accepted=False, QuotaExceeded) past this many; each is a load balancer with its own addresses; 0: no quota")
	fs.IntVar(&t.opts.MaxRegexPathsPerNamespace, "max-regex-paths-per-namespace", t.opts.MaxRegexPathsPerNamespace,
		"refuse, newest first, the Ingresses whose regular-expression paths (use-regex, rewrite-target with capture groups) take their namespace past this many (TooManyRegexPaths): every check and reload of a shared HAProxy process compiles them; 0: no cap")
	fs.IntVar(&t.opts.MaxRegexPathsPerLoadBalancer, "max-regex-paths-per-load-balancer", t.opts.MaxRegexPathsPerLoadBalancer,
		"refuse, newest first, the Ingresses whose regular-expression paths take their load balancer past this many (TooManyRegexPaths): HAProxy tries them one after another on every request; 0: no cap")
}

// options returns the translation options with the shares resolved
// against the caps they divide.
func (t *translateFlags) options() (translate.Options, error) {
	o := t.opts
	if o.MaxIngresses < 0 || o.MaxHTTPRoutes < 0 || o.MaxGatewaysPerNamespace < 0 ||
		o.MaxRegexPathsPerNamespace < 0 || o.MaxRegexPathsPerLoadBalancer < 0 {
		return o, fmt.Errorf("caps and quotas are counts of 0 (none) or more")
	}
	o.MaxIngressesPerNamespace = t.ingShare.of(uint64(o.MaxIngresses))
	o.MaxHTTPRoutesPerNamespace = t.routeShare.of(uint64(o.MaxHTTPRoutes))
	return o, nil
}
