package translate

import (
	"net/netip"
	"strings"
	"testing"
)

func TestMemberPolicy(t *testing.T) {
	kube, err := NewMemberPolicy(false, "", "10.250.0.0/16", "")
	if err != nil {
		t.Fatal(err)
	}
	run, err := NewMemberPolicy(true, ":8082", "127.10.0.0/16", "127.20.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		policy MemberPolicy
		addr   string
		port   int
		want   string // a piece of the refusal; "" admitted
	}{
		{"pod", kube, "10.1.2.3", 8080, ""},
		{"loopback in a cluster", kube, "127.0.0.1", 8080, "loopback"},
		{"IPv6 loopback in a cluster", kube, "::1", 8080, "loopback"},
		{"metadata", kube, "169.254.169.254", 80, "link-local"},
		{"IPv6 link-local", run, "fe80::1", 80, "link-local"},
		{"a VIP", kube, "10.250.0.7", 80, "address pool 10.250.0.0/16"},
		{"mapped VIP", kube, "::ffff:10.250.0.7", 80, "address pool"},
		{"loopback backend in pier run", run, "127.0.0.1", 9001, ""},
		{"pier run's API", run, "127.0.0.1", 8082, "own API"},
		{"pier run's API on another loopback address", run, "127.3.4.5", 8082, "own API"},
		{"pier run's VIP", run, "127.10.0.2", 80, "address pool 127.10.0.0/16"},
	} {
		got := tc.policy.refusal(netip.MustParseAddr(tc.addr), tc.port)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s:%d refused for %q, want %q", tc.name, tc.addr, tc.port, got, tc.want)
		}
	}
	if _, err := NewMemberPolicy(false, "", "not-a-cidr"); err == nil {
		t.Error("a bad pool was accepted")
	}
}
