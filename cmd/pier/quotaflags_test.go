package main

import (
	"flag"
	"testing"

	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/translate"
)

// The per-namespace quotas are on by default: a tenth of each cap on
// objects (translate's defaults), a quarter of each pool; a count or a
// share on the command line replaces them, 0 turns one off.
func TestQuotaFlags(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		public         string
		quota          controller.Quota
		ingresses, hrs int
		gateways       int
	}{
		{nil, "192.0.2.0/28", controller.Quota{LoadBalancers: 16384, PublicIPs: 4},
			translate.DefaultMaxIngressesPerNamespace, translate.DefaultMaxHTTPRoutesPerNamespace, translate.DefaultMaxGatewaysPerNamespace},
		{nil, "", controller.Quota{LoadBalancers: 16384}, 1000, 1000, 100},
		{[]string{"--max-ingresses", "20", "--max-httproutes", "6", "--max-public-ips-per-namespace", "50%"}, "192.0.2.0/28",
			controller.Quota{LoadBalancers: 16384, PublicIPs: 7}, 2, 1, 100},
		{[]string{"--max-ingresses-per-namespace", "7", "--max-httproutes-per-namespace", "0", "--max-gateways-per-namespace", "3",
			"--max-load-balancers-per-namespace", "0", "--max-public-ips-per-namespace", "2"}, "",
			controller.Quota{PublicIPs: 2}, 7, 0, 3},
		{[]string{"--max-ingresses", "0"}, "", controller.Quota{LoadBalancers: 16384}, 0, 1000, 100},
	} {
		var pools poolFlags
		var tr translateFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		pools.register(fs, "10.250.0.0/16", "", "")
		tr.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		q, err := pools.quotaFor("10.250.0.0/16", tc.public)
		if err != nil {
			t.Fatal(err)
		}
		o, err := tr.options()
		if err != nil {
			t.Fatal(err)
		}
		if q != tc.quota || o.MaxIngressesPerNamespace != tc.ingresses || o.MaxHTTPRoutesPerNamespace != tc.hrs ||
			o.MaxGatewaysPerNamespace != tc.gateways {
			t.Errorf("%v: quota %+v, Ingresses %d, HTTPRoutes %d, Gateways %d; want %+v, %d, %d, %d", tc.args, q,
				o.MaxIngressesPerNamespace, o.MaxHTTPRoutesPerNamespace, o.MaxGatewaysPerNamespace,
				tc.quota, tc.ingresses, tc.hrs, tc.gateways)
		}
	}
	var tr translateFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	tr.register(fs)
	if err := fs.Parse([]string{"--max-regex-paths-per-namespace", "7", "--max-regex-paths-per-load-balancer", "3"}); err != nil {
		t.Fatal(err)
	}
	if o, err := tr.options(); err != nil || o.MaxRegexPathsPerNamespace != 7 || o.MaxRegexPathsPerLoadBalancer != 3 {
		t.Errorf("regex caps: %v, %d per namespace, %d per load balancer; want 7, 3", err, o.MaxRegexPathsPerNamespace, o.MaxRegexPathsPerLoadBalancer)
	}
	for _, bad := range []string{"-1", "0%", "101%", "x", "1.5%"} {
		var s share
		if err := s.Set(bad); err == nil {
			t.Errorf("%q accepted as %s", bad, s.String())
		}
	}
}
