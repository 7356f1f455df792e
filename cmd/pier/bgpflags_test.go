package main

import (
	"flag"
	"io"
	"strings"
	"testing"
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
		cfg.RouterID.String() != "10.0.0.11" || cfg.StandbyPrepend != 2 {
		t.Errorf("config %+v", cfg)
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
