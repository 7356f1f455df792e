package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/bgp"
)

func TestBGPFlags(t *testing.T) {
	parse := func(args ...string) (*bgpFlags, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var b bgpFlags
		b.register(fs)
		return &b, fs.Parse(args)
	}
	b, err := parse("--bgp-peer", "10.0.0.1,10.0.0.2:1179@65010", "--bgp-asn", "65001", "--bgp-peer-asn", "65000", "--bgp-next-hop", "10.0.0.11")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := b.config()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Peers) != 2 || cfg.Peers[0].ASN != 65000 || cfg.Peers[1].ASN != 65010 || cfg.Peers[1].Port != 1179 ||
		cfg.RouterID.String() != "10.0.0.11" || cfg.StandbyPrepend != 2 || cfg.BFD.Enabled {
		t.Errorf("config %+v", cfg)
	}
	b, _ = parse("--bgp-peer", "10.0.0.1@2", "--bgp-asn", "1", "--bgp-next-hop", "10.0.0.11", "--bgp-bfd", "--bgp-bfd-interval", "50ms", "--bgp-bfd-multiplier", "5")
	if cfg, err := b.config(); err != nil || cfg.BFD != (bgp.BFD{Enabled: true, Interval: 50 * time.Millisecond, Multiplier: 5}) {
		t.Errorf("--bgp-bfd: %+v, %v", cfg, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bgp-peer", "10.0.0.1", "--bgp-peer-asn", "1", "--bgp-next-hop", "10.0.0.11"}, "--bgp-asn"},
		{[]string{"--bgp-peer", "10.0.0.1", "--bgp-asn", "1", "--bgp-next-hop", "10.0.0.11"}, "no AS number"},
		{[]string{"--bgp-peer", "10.0.0.1;x", "--bgp-asn", "1", "--bgp-peer-asn", "2", "--bgp-next-hop", "10.0.0.11"}, "want ADDR"},
		{[]string{"--bgp-peer", "10.0.0.1", "--bgp-asn", "1", "--bgp-peer-asn", "2"}, "--bgp-next-hop"},
		{[]string{"--bgp-peer", "10.0.0.1@x", "--bgp-asn", "1", "--bgp-next-hop", "10.0.0.11"}, "bad AS number"},
		{[]string{"--bgp-peer", "10.0.0.1@2", "--bgp-asn", "1", "--bgp-next-hop", "10.0.0.11", "--bgp-bfd", "--bgp-bfd-interval", "1ms"}, "--bgp-bfd-interval"},
		{[]string{"--bgp-peer", "10.0.0.1@2", "--bgp-asn", "1", "--bgp-next-hop", "10.0.0.11", "--bgp-bfd", "--bgp-bfd-multiplier", "0"}, "--bgp-bfd-multiplier"},
		{[]string{"--bgp-peer", "10.0.0.1@2", "--bgp-asn", "1", "--bgp-next-hop", "10.0.0.11", "--bgp-bfd-multiplier", "256"}, "--bgp-bfd-multiplier"},
	} {
		b, err := parse(tc.args...)
		if err == nil {
			_, err = b.config()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
	if b, _ := parse(); b != nil {
		if cfg, err := b.config(); cfg != nil || err != nil {
			t.Errorf("no --bgp-peer: %v, %v; want no BGP", cfg, err)
		}
	}
}

func TestBGPPasswordFileAndPrefixLimit(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, "passwords")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	config := func(args ...string) (*bgpFlags, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var b bgpFlags
		b.register(fs)
		base := []string{"--bgp-peer", "10.0.0.1,10.0.0.2,10.0.0.3", "--bgp-asn", "65001", "--bgp-peer-asn", "65000", "--bgp-next-hop", "10.0.0.11"}
		return &b, fs.Parse(append(base, args...))
	}
	b, _ := config("--bgp-password-file", file("10.0.0.1 one\n* others\n"))
	cfg, err := b.config()
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.Peers[0].Password) != "one" || string(cfg.Peers[1].Password) != "others" || string(cfg.Peers[2].Password) != "others" {
		t.Errorf("passwords not given to the peers as the file says")
	}
	if cfg.MaxPrefixes != 1000 {
		t.Errorf("default prefix limit %d, want 1000", cfg.MaxPrefixes)
	}
	b, _ = config("--bgp-max-prefixes", "0")
	if cfg, err := b.config(); err != nil || cfg.MaxPrefixes >= 0 || cfg.Peers[0].Password != "" {
		t.Errorf("--bgp-max-prefixes 0: %v, %+v; want no limit (negative) and no password", err, cfg)
	}
	for content, want := range map[string]string{
		"10.0.0.9 typo\n":    "no --bgp-peer",
		"10.0.0.1\n":         "line 1",
		"secret-alone-x y\n": "line 1",
	} {
		b, _ := config("--bgp-password-file", file(content))
		_, err := b.config()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", content, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-alone") {
			t.Errorf("the error quotes the file: %v", err)
		}
	}
	b, _ = config("--bgp-password-file", filepath.Join(dir, "absent"))
	if _, err := b.config(); err == nil {
		t.Errorf("a missing password file was accepted")
	}
}
