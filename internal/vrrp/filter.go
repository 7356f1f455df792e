package vrrp

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"pier.dev/pier/internal/nft"
)

// The advert filter: keepalived takes an instance's adverts from its
// unicast peers only (vrrp_check_unicast_src, TTL 255), and beside it an
// nftables table of pier's own (nft.VRRPTable, rules in nft.RenderVRRP)
// drops the others in the kernel, before keepalived reads them: a
// neighbour flooding forged adverts then costs keepalived nothing, not
// even a log line per packet (keepalived logs each advert it refuses,
// and the agent reads that log for its states). The table lives as long
// as keepalived: installed before it starts, replaced when the instances
// change, removed when it is stopped, and left in place when the agent
// exits without stopping it (the keepalived that keeps running is still
// guarded; the next agent adopts both).
//
// Without nft the filter is missing, not keepalived: the failure is
// logged, and keepalived's own check still refuses the forged adverts.

// nftTimeout bounds one nft transaction: it takes milliseconds.
const nftTimeout = 10 * time.Second

// guards is what the filter lets through for cfg's instances.
func guards(cfg Config) []nft.VRRPGuard {
	out := make([]nft.VRRPGuard, 0, len(cfg.Instances))
	for _, in := range cfg.Instances {
		out = append(out, nft.VRRPGuard{Interface: in.Interface, RouterID: in.RouterID, Peers: in.Peers})
	}
	return out
}

// guard makes the filter match cfg (a table with no rule for none). It
// runs nft only when the rendering changed. Called with k.mu held.
func (k *Keepalived) guard(ctx context.Context, cfg Config) {
	text, err := nft.RenderVRRP(guards(cfg))
	if err == nil && bytes.Equal(text, k.guarded) {
		return
	}
	if err == nil {
		err = k.nft(ctx, text)
	}
	if err != nil {
		k.guarded = nil // tried again at the next Apply
		k.logger.Error("vrrp: adverts from other neighbours than the peers are not filtered in the kernel; "+
			"keepalived still refuses them itself", "table", nft.VRRPTable, "error", err)
		return
	}
	k.guarded = text
	k.logger.Info("vrrp: adverts filtered to the peers'", "table", nft.VRRPTable, "instances", len(cfg.Instances))
}

// unguard removes the filter. Called with k.mu held.
func (k *Keepalived) unguard(ctx context.Context) {
	text, _ := nft.RenderVRRP(nil) // deletes the table; never fails
	if err := k.nft(ctx, text); err != nil {
		k.logger.Warn("vrrp: advert filter not removed", "table", nft.VRRPTable, "error", err)
		return
	}
	k.guarded = nil
}

// nft runs one transaction in keepalived's network namespace.
func (k *Keepalived) nft(ctx context.Context, text []byte) error {
	ctx, cancel := context.WithTimeout(ctx, nftTimeout)
	defer cancel()
	args := []string{"nft", "-f", "-"}
	if k.netns != "" {
		args = append([]string{"ip", "netns", "exec", k.netns}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin = bytes.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}
