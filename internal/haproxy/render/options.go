// Package render turns a model.LoadBalancer into its HAProxy files, byte
// for byte deterministic: a fragment (haproxy.conf: frontends and
// backends, every section name scoped to the load balancer, so many
// fragments load into one process) and its crt-list; the process-level
// global.conf (Global) and the per-process process.conf (ProcessConf).
// It plans how to move a running load balancer from one Result to the
// next: runtime API commands when only members changed, a reload
// otherwise. Every word of every line goes through package encode.
package render

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
)

// Options are the node-level settings of a rendered instance. The zero
// value of every field but Dir means "the default".
type Options struct {
	// Dir is used by Config and CrtList only, which render a load
	// balancer as one process in one folder (tests, benchmarks): it is
	// both the load balancer's and the process's folder. Render and
	// ProcessConf take their paths from package layout instead.
	Dir string
	// MinSlots is the least number of server slots per backend (16).
	MinSlots int
	// HardStopAfter bounds how long old workers drain after a reload (60s).
	HardStopAfter time.Duration
	// MaxConn is the process-wide connection limit (4096).
	MaxConn int
	// BackendMaxConn bounds the requests one backend (a Service port's
	// pool) holds at once, queued ones included (DefaultBackendMaxConn);
	// the next one gets 503 at once. A slow or looping backend then cannot
	// take every connection of its process from the other routes and load
	// balancers there. Negative: no bound.
	BackendMaxConn int
	Timeouts       Timeouts
	// NoEmptyResponseRetry leaves empty-response out of the defaults'
	// retry-on: only connection failures are retried, and HAProxy keeps
	// no copy of each request for a retry. A pool's own retry-on (an
	// HTTPRoute retry, proxy-next-upstream-tries) is not changed.
	NoEmptyResponseRetry bool
	// User and Group make HAProxy drop privileges; empty keeps them.
	User, Group string
	// MaxConfigBytes caps haproxy.conf (DefaultMaxConfigBytes, 16 MiB).
	// Config and PlanUpdate refuse a LoadBalancer whose file would be
	// larger, with an error wrapping ErrConfigTooLarge, so one huge
	// group cannot make the agent write, check and reload without bound;
	// the running configuration stays as it is.
	MaxConfigBytes int
	// SparePools is how many empty backends a shared load balancer (an
	// Ingress group, a Gateway) keeps for pools that join it without a
	// reload (DefaultSparePools; negative: none).
	SparePools int
	// TrustedProxies are the client addresses whose forwarding headers
	// (X-Forwarded-For, -Host, -Port, -Proto, Forwarded) are kept and
	// appended to rather than replaced: a load balancer or proxy in front
	// of pier (forwarding.go). Empty: no client is trusted. At most
	// maxTrustedProxies masked prefixes.
	TrustedProxies []netip.Prefix
	// Users returns the users of a policy's basic auth (the agent reads
	// them from the Secret). Nil renders every userlist empty: the routes
	// that ask for basic auth then answer 401 to everyone.
	Users UserLookup
	// AccessLog sends every HTTP request's line to the agent (accesslog.go).
	AccessLog AccessLogOptions
}

// DefaultBackendMaxConn is Options.BackendMaxConn when unset: a quarter
// of the default process limit, so that one backend leaves at least three
// quarters of a process to everything else it serves.
const DefaultBackendMaxConn = 1024

// Timeouts of the defaults section. Zero fields take the defaults below.
type Timeouts struct {
	Connect     time.Duration // 5s
	Client      time.Duration // 50s
	Server      time.Duration // 50s
	HTTPRequest time.Duration // 10s: the whole request head, against slowloris
	KeepAlive   time.Duration // 10s: idle time between two requests
	Queue       time.Duration // 30s: wait for a free server slot
	Tunnel      time.Duration // 1h: WebSocket and other upgraded streams
}

// CheckStateDir reports whether load-balancer folders below stateDir
// leave room for HAProxy's socket paths (layout.New says why not), so a
// long --state-dir is refused at start-up rather than at the first render.
func CheckStateDir(stateDir string) error {
	_, err := layout.New(stateDir)
	return err
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.MinSlots == 0 {
		o.MinSlots = 16
	}
	if o.MaxConn == 0 {
		o.MaxConn = 4096
	}
	if o.MaxConfigBytes == 0 {
		o.MaxConfigBytes = DefaultMaxConfigBytes
	}
	if o.BackendMaxConn == 0 {
		o.BackendMaxConn = DefaultBackendMaxConn
	}
	if o.SparePools == 0 {
		o.SparePools = DefaultSparePools
	}
	def(&o.HardStopAfter, 60*time.Second)
	t := &o.Timeouts
	def(&t.Connect, 5*time.Second)
	def(&t.Client, 50*time.Second)
	def(&t.Server, 50*time.Second)
	def(&t.HTTPRequest, 10*time.Second)
	def(&t.KeepAlive, 10*time.Second)
	def(&t.Queue, 30*time.Second)
	def(&t.Tunnel, time.Hour)
	return o
}

func (o Options) check() error {
	if o.MinSlots < 1 || o.MinSlots > 4096 {
		return errors.New("options: MinSlots must be between 1 and 4096")
	}
	if o.MaxConn < 1 {
		return errors.New("options: MaxConn must be positive")
	}
	if o.MaxConfigBytes < 0 {
		return errors.New("options: MaxConfigBytes must not be negative")
	}
	if o.AccessLog.Socket != "" {
		if err := encode.FilePath(o.AccessLog.Socket).Err(); err != nil {
			return fmt.Errorf("options: access log socket: %w", err)
		}
	}
	if err := checkTrusted(o.TrustedProxies); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	for _, name := range []string{o.User, o.Group} {
		if name != "" {
			if err := encode.Account(name).Err(); err != nil {
				return fmt.Errorf("options: %w", err)
			}
		}
	}
	return nil
}

// maxTrustedProxies bounds Options.TrustedProxies: a few networks of
// load balancers, not an allow-list of clients.
const maxTrustedProxies = 64

func checkTrusted(list []netip.Prefix) error {
	if len(list) > maxTrustedProxies {
		return fmt.Errorf("%d trusted proxies, at most %d", len(list), maxTrustedProxies)
	}
	for _, p := range list {
		if err := encode.Prefix(p).Err(); err != nil {
			return fmt.Errorf("trusted proxy: %w", err)
		}
	}
	return nil
}
