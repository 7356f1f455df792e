package bench

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// Routing measurement: routes are n policies of one load
// balancer; the request takes the first or the last of them.
const (
	// RoutingFirstHost's Exact /health is policy 1 (an exact host and an
	// Exact path come first); the last policy is the host-less Prefix "/",
	// which RoutingLastHost (no rule names it) takes.
	RoutingFirstHost = "r00000.bench.example"
	RoutingLastHost  = "www.unlisted.example"
)

// RoutingSnapshot is one load balancer with n routes (Ingresses of 100
// rules sharing it): Exact /health on
// RoutingFirstHost and the host-less Prefix "/" to DataPlaneTarget, and
// n-2 more to ten decoy Services: hosts r<k>.bench.example with Prefix
// /api/v1, /api, /static and / in turn.
func RoutingSnapshot(n int, targetPort, decoyPort int32) *source.Snapshot {
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{IngressClass()}}
	const ns = "bench"
	decoy := func(k int) string { return fmt.Sprintf("decoy-%d", k%10) }
	rules := []networkingv1.IngressRule{Rule(RoutingFirstHost, Exact("/health", DataPlaneTarget))}
	paths := []string{"/api/v1", "/api", "/static", "/"}
	byHost := map[string][]networkingv1.HTTPIngressPath{}
	var hosts []string
	for j := range n - 2 {
		h := fmt.Sprintf("r%05d.bench.example", j/len(paths)+1)
		if byHost[h] == nil {
			hosts = append(hosts, h)
		}
		byHost[h] = append(byHost[h], Prefix(paths[j%len(paths)], decoy(j)))
	}
	for _, h := range hosts {
		rules = append(rules, Rule(h, byHost[h]...))
	}
	rules = append(rules, Rule("", Prefix("/", DataPlaneTarget)))
	// One shared load balancer: an Ingress takes at most 1,000 paths.
	for k := 0; k*100 < len(rules); k++ {
		ing := Ingress(ns, fmt.Sprintf("routes-%02d", k), k, rules[k*100:min(len(rules), (k+1)*100)]...)
		ing.Annotations = map[string]string{annotation.Prefix + "load-balancer": "shared"}
		snap.Ingresses = append(snap.Ingresses, ing)
	}
	svc, es := Backend(ns, DataPlaneTarget, targetPort, "127.0.0.1")
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	for k := range 10 {
		svc, es := Backend(ns, decoy(k), decoyPort, "127.0.0.1")
		snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	}
	return snap
}

// RoutingConfig translates RoutingSnapshot(n) with the listener on port,
// renders it for an instance in dir and writes its route maps there. It
// checks that the first and last policies are the measured ones.
func RoutingConfig(n int, targetPort, decoyPort int32, port int, dir string) ([]byte, *model.LoadBalancer, error) {
	opts := translate.DefaultOptions()
	opts.Members.AllowLoopback = true // the backends listen on 127.0.0.1, as in pier run
	opts.HTTPPort = port
	res := translate.Ingresses(RoutingSnapshot(n, targetPort, decoyPort), opts)
	if len(res.Problems) > 0 || len(res.LoadBalancers) != 1 {
		return nil, nil, fmt.Errorf("routing fixture: %d load balancers, problems %v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	ps := lb.Listeners[0].Policies
	first, last := ps[0], ps[len(ps)-1]
	if len(ps) != n || first.Rules[0].Value != RoutingFirstHost || len(last.Rules) != 1 || last.Rules[0].Value != "/" {
		return nil, nil, fmt.Errorf("routing fixture: %d policies, first %+v, last %+v", len(ps), first.Rules, last.Rules)
	}
	conf, err := render.Config(lb, render.Options{Dir: dir})
	if err != nil {
		return nil, nil, err
	}
	return conf, lb, writeMaps(lb, dir)
}

// RoutingReference is the hand-written HAProxy configuration doing the
// same routing as lb with maps, as an operator who knows HAProxy would
// write it: pier's global and defaults values, one frontend, a map per
// kind of match (keys as in render's routes.go, which is the shortest
// element-wise scheme we know), one server per backend, none of pier's
// per-request extras (header guard, X-Forwarded-*, L7 retries, Server,
// the drain rule, 16 server slots). It writes its maps into dir.
func RoutingReference(lb *model.LoadBalancer, bind, target, decoy string, dir string) ([]byte, error) {
	exact, prefix, hosts := &strings.Builder{}, &strings.Builder{}, &strings.Builder{}
	backends := map[string]string{}
	var catchAll string
	for _, p := range lb.Listeners[0].Policies {
		pool := lb.Pool(p.PoolID)
		be := "be_" + pool.Service
		backends[be] = decoy
		if pool.Service == DataPlaneTarget {
			backends[be] = target
		}
		var host, path string
		var isExact bool
		for _, r := range p.Rules {
			if r.Type == model.RuleHostName {
				if r.Compare != model.CompareEqualTo {
					return nil, fmt.Errorf("reference: wildcard hosts are not in the fixture")
				}
				host = r.Value
			} else if isExact = r.Compare == model.CompareEqualTo; isExact {
				path = r.Value
			} else {
				path = strings.TrimRight(r.Value, "/")
			}
		}
		switch {
		case isExact:
			fmt.Fprintf(exact, "%s%s/ %s\n", host, path, be)
		case path == "" && host == "":
			catchAll = be
		case path == "":
			fmt.Fprintf(hosts, "%s %s\n", host, be)
		default:
			fmt.Fprintf(prefix, "%s%s/ %s\n", host, path, be)
		}
	}
	for name, b := range map[string]*strings.Builder{"exact.map": exact, "prefix.map": prefix, "hosts.map": hosts} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o600); err != nil {
			return nil, err
		}
	}
	var c strings.Builder
	fmt.Fprintf(&c, `# bench reference: the same routing with maps, pier's global values
global
    maxconn 4096
    tune.bufsize 16384
    tune.maxrewrite 1024

%[4]s
frontend fe_ref
    bind %[1]s
    http-request set-var(txn.host) req.hdr(host),field(1,:),lower
    http-request set-var(txn.path) path,concat(/)
    http-request set-var(txn.be) var(txn.host),concat(,txn.path),map_str(%[2]s/exact.map)
    http-request set-var(txn.be) var(txn.host),concat(,txn.path),map_beg(%[2]s/prefix.map) unless { var(txn.be) -m found }
    http-request set-var(txn.be) var(txn.host),map_str(%[2]s/hosts.map) unless { var(txn.be) -m found }
    use_backend %%[var(txn.be)] if { var(txn.be) -m found }
    default_backend %[3]s
`, bind, dir, catchAll, referenceDefaults)
	for _, be := range slices.Sorted(maps.Keys(backends)) {
		fmt.Fprintf(&c, "\nbackend %s\n    server s1 %s\n", be, backends[be])
	}
	return []byte(c.String()), nil
}

// RoutingNginx is the same routing as lb written for nginx, the way an
// nginx user would: a server block per host, `location =` for an Exact
// path, `location = /p` plus `location /p/` for an element-wise Prefix
// /p, and a default server for the host-less rules. Upstreams keep
// connections alive (HAProxy reuses its server connections too), access
// logs are off (pier's HAProxy logs nothing either), and nginx runs one
// worker per CPU (HAProxy 2.6 one thread per CPU). Everything it writes
// (pid, logs, temp files) stays in dir.
func RoutingNginx(lb *model.LoadBalancer, listen, target, decoy, dir string) ([]byte, error) {
	type server struct {
		locations []string
	}
	servers := map[string]*server{} // by host; "" is the default server
	var hosts []string
	upstreams := map[string]string{}
	for _, p := range lb.Listeners[0].Policies {
		pool := lb.Pool(p.PoolID)
		up := "be_" + strings.ReplaceAll(pool.Service, "-", "_")
		upstreams[up] = decoy
		if pool.Service == DataPlaneTarget {
			upstreams[up] = target
		}
		var host, path string
		exact := false
		for _, r := range p.Rules {
			if r.Type == model.RuleHostName {
				if r.Compare != model.CompareEqualTo {
					return nil, fmt.Errorf("nginx reference: wildcard hosts are not in the fixture")
				}
				host = r.Value
			} else {
				path, exact = r.Value, r.Compare == model.CompareEqualTo
			}
		}
		s := servers[host]
		if s == nil {
			s = &server{}
			servers[host] = s
			hosts = append(hosts, host)
		}
		pass := " { proxy_pass http://" + up + "; }"
		switch {
		case exact:
			s.locations = append(s.locations, "location = "+path+pass)
		case path == "" || path == "/":
			s.locations = append(s.locations, "location /"+pass)
		default:
			p := strings.TrimRight(path, "/")
			s.locations = append(s.locations, "location = "+p+pass, "location "+p+"/"+pass)
		}
	}
	var c strings.Builder
	fmt.Fprintf(&c, `# bench reference: the same routing in nginx, server blocks per host
worker_processes 2;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server_names_hash_max_size 8192;
    server_names_hash_bucket_size 128;
    keepalive_timeout 10s;
    keepalive_requests 10000000;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_connect_timeout 5s;
    proxy_read_timeout 50s;
`, dir)
	for _, up := range slices.Sorted(maps.Keys(upstreams)) {
		fmt.Fprintf(&c, "    upstream %s { server %s; keepalive 64; }\n", up, upstreams[up])
	}
	if servers[""] == nil {
		return nil, fmt.Errorf("nginx reference: the fixture has no host-less rule")
	}
	slices.Sort(hosts) // "" first: the default server
	for _, h := range hosts {
		name := "server_name " + h + ";"
		if h == "" {
			name = "server_name _;"
		}
		directive := "listen " + listen
		if h == "" {
			directive += " default_server"
		}
		fmt.Fprintf(&c, "    server {\n        %s;\n        %s\n", directive, name)
		for _, l := range servers[h].locations {
			fmt.Fprintf(&c, "        %s\n", l)
		}
		c.WriteString("    }\n")
	}
	c.WriteString("}\n")
	return []byte(c.String()), nil
}
