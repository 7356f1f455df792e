package nativedriver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// Without nft the driver cannot be made, and says what is missing; the
// stand-in the agent uses then refuses native load balancers with that
// reason, for good (no retry loop), and holds nothing.
func TestUnavailableSaysWhy(t *testing.T) {
	_, err := New(Config{StateDir: t.TempDir(), Binary: "/nonexistent/nft"})
	if err == nil || !strings.Contains(err.Error(), "nftables") {
		t.Fatalf("New without nft: %v", err)
	}
	d := Unavailable(err)
	if d.Provider() != model.ProviderNative {
		t.Fatalf("provider %s", d.Provider())
	}
	if err := d.Recover(context.Background(), map[string]bool{"x": true}); err != nil {
		t.Fatal(err)
	}
	_, aerr := d.Apply(context.Background(), &model.LoadBalancer{UUID: "x", Name: "shop/dns", Provider: model.ProviderNative})
	if !errors.Is(aerr, driver.ErrRejected) || !strings.Contains(aerr.Error(), "nftables") || !strings.Contains(aerr.Error(), "shop/dns") {
		t.Fatalf("apply: %v", aerr)
	}
	if got := d.Close(true); len(got) != 0 {
		t.Fatalf("closed %v", got)
	}
}
