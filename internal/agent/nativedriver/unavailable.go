package nativedriver

import (
	"context"
	"fmt"
	"log/slog"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// NewOrUnavailable returns the driver, or, when this process cannot
// program nftables (no nft, no root), one that reports every native load
// balancer in ERROR with the reason: Services fail visibly and Ingresses
// are unaffected.
func NewOrUnavailable(cfg Config) driver.Driver {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d, err := New(cfg)
	if err != nil {
		cfg.Logger.Warn("native provider unavailable: Services of type LoadBalancer will not be served here", "error", err)
		return Unavailable(err)
	}
	return d
}

// unavailable stands in for the driver when nftables cannot be used (no
// nft, no root): every native load balancer is reported in ERROR with
// the reason, and the other providers run as usual.
type unavailable struct{ err error }

// Unavailable returns a driver that refuses every native load balancer
// with err.
func Unavailable(err error) driver.Driver { return unavailable{err: err} }

func (u unavailable) Provider() model.Provider                       { return model.ProviderNative }
func (u unavailable) Recover(context.Context, map[string]bool) error { return nil }
func (u unavailable) Drifted() []string                              { return nil }
func (u unavailable) Remove(string)                                  {}
func (u unavailable) Close(bool) []string                            { return nil }

func (u unavailable) Apply(_ context.Context, lb *model.LoadBalancer) (driver.Applied, error) {
	// Rejected: retrying cannot help until the agent restarts with nft.
	return driver.Applied{}, fmt.Errorf("native %s: %w: %w", lb.Name, driver.ErrRejected, u.err)
}
