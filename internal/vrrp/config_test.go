package vrrp

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/goldenfile"
)

func sample() Config {
	a := netip.MustParseAddr
	return Config{
		Node: "node-a", Dir: "/var/lib/pier/vrrp", Advert: DefaultAdvert,
		Instances: []Instance{
			{Name: "pair-b-a", RouterID: 7, Interface: "eth0", Priority: PriorityStandby,
				Source: a("10.99.0.1"), Peers: []netip.Addr{a("10.99.0.2")},
				Addresses: []netip.Addr{a("10.99.1.20"), a("fd00::20")}},
			{Name: "pair-a-b", RouterID: 3, Interface: "eth0", Priority: PriorityActive,
				Source: a("10.99.0.1"), Peers: []netip.Addr{a("10.99.0.2")},
				Addresses: []netip.Addr{a("10.99.1.11"), a("10.99.1.10"), a("10.99.1.11")}},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	got, err := Render(sample())
	if err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, filepath.Join("testdata", "two-pairs.conf"), got, "go test ./internal/vrrp")
}

// Order of instances and addresses in the input must not matter.
func TestRenderDeterministic(t *testing.T) {
	c1, c2 := sample(), sample()
	c2.Instances[0], c2.Instances[1] = c2.Instances[1], c2.Instances[0]
	r1, err1 := Render(c1)
	r2, err2 := Render(c2)
	if err1 != nil || err2 != nil || !bytes.Equal(r1, r2) {
		t.Fatalf("renders differ: %v %v\n%s\n---\n%s", err1, err2, r1, r2)
	}
}

// Every string value, valid as given, must fail with anything appended that
// keepalived would read as another word, a comment or a block.
func TestRenderRefusesInjection(t *testing.T) {
	for _, evil := range []string{";evil", " evil", "\nnotify_master /bin/sh", "#x", "!x", "{", "}", "\"x", "X"} {
		cases := map[string]func(c *Config){
			"node":      func(c *Config) { c.Node += evil },
			"dir":       func(c *Config) { c.Dir += evil },
			"name":      func(c *Config) { c.Instances[0].Name += evil },
			"interface": func(c *Config) { c.Instances[0].Interface += evil },
		}
		for field, mutate := range cases {
			c := sample()
			mutate(&c)
			if evil == "X" && (field == "dir" || field == "interface") {
				continue // upper case is a plain word in these two
			}
			if _, err := Render(c); err == nil {
				t.Errorf("%s with %q appended rendered", field, evil)
			}
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	a := netip.MustParseAddr
	cases := map[string]func(c *Config){
		"router id 0":        func(c *Config) { c.Instances[0].RouterID = 0 },
		"router id 256":      func(c *Config) { c.Instances[0].RouterID = 256 },
		"duplicate id":       func(c *Config) { c.Instances[0].RouterID = c.Instances[1].RouterID },
		"priority 150":       func(c *Config) { c.Instances[0].Priority = 150 },
		"no peer":            func(c *Config) { c.Instances[0].Peers = nil },
		"no address":         func(c *Config) { c.Instances[0].Addresses = nil },
		"peer other family":  func(c *Config) { c.Instances[0].Peers = []netip.Addr{a("fd00::2")} },
		"loopback address":   func(c *Config) { c.Instances[0].Addresses = []netip.Addr{a("127.0.0.1")} },
		"advert 5ms":         func(c *Config) { c.Advert = 5 * time.Millisecond },
		"advert 105ms":       func(c *Config) { c.Advert = 105 * time.Millisecond },
		"relative dir":       func(c *Config) { c.Dir = "state/vrrp" },
		"dot-dot dir":        func(c *Config) { c.Dir = "/var/../etc" },
		"interface too long": func(c *Config) { c.Instances[0].Interface = "abcdefghijklmnop" },
	}
	for name, mutate := range cases {
		c := sample()
		mutate(&c)
		if _, err := Render(c); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// The golden file is what keepalived itself accepts.
func TestRenderPassesKeepalivedCheck(t *testing.T) {
	bin, err := exec.LookPath("keepalived")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("keepalived not installed (hack/deps.sh installs it)")
		}
		t.Skip("keepalived not installed")
	}
	c := sample()
	c.Dir = t.TempDir()
	out, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(t.Context(), bin, out, c.Dir); err != nil {
		t.Fatal(err)
	}
	bad := append(out, []byte("vrrp_instance broken {\n  virtual_router_id 999\n}\n")...)
	if err := Check(t.Context(), bin, bad, c.Dir); err == nil || !strings.Contains(err.Error(), "keepalived") {
		t.Fatalf("a config keepalived refuses passed the check: %v", err)
	}
}
