package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// waitForAddress polls the Ingress status, at once and then every
// interval, until it holds an address, which it returns, or timeout passes.
// Read errors are retried (the controller may still be starting); the last
// one is reported on timeout.
func waitForAddress(ctx context.Context, c Cluster, ns, name string, interval, timeout time.Duration) (string, error) {
	if name == "" {
		return "", errors.New("no Ingress was created in this scenario")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		lbs, err := c.IngressStatus(ctx, ns, name)
		if err == nil {
			if addr := firstAddress(lbs); addr != "" {
				return addr, nil
			}
		} else {
			lastErr = err
		}
		if sleep(ctx, interval) != nil {
			break
		}
	}
	if lastErr != nil {
		return "", fmt.Errorf("waiting for ingress %s/%s status: no address after %s (last error: %w)", ns, name, timeout, lastErr)
	}
	return "", fmt.Errorf("waiting for ingress %s/%s status: no address after %s", ns, name, timeout)
}

// waitAddressAbsent passes when the Ingress status holds no address for the
// whole of timeout. Upstream passes as soon as its wait for an address
// fails for any reason; here a read error is not taken for "no address",
// and at least one read must succeed, so a dead controller cannot pass.
func waitAddressAbsent(ctx context.Context, c Cluster, ns, name string, interval, timeout time.Duration) error {
	if name == "" {
		return errors.New("no Ingress was created in this scenario")
	}
	deadline := time.Now().Add(timeout)
	var (
		reads   int
		lastErr error
	)
	for {
		lbs, err := c.IngressStatus(ctx, ns, name)
		if err != nil {
			lastErr = err
		} else {
			reads++
			if addr := firstAddress(lbs); addr != "" {
				return fmt.Errorf("ingress %s/%s got the address %s; its status should stay empty", ns, name, addr)
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if err := sleep(ctx, min(interval, left)); err != nil {
			return err
		}
	}
	if reads == 0 {
		return fmt.Errorf("could not read ingress %s/%s status once in %s: %w", ns, name, timeout, lastErr)
	}
	return nil
}
