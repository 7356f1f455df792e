// Package render turns a model.LoadBalancer into the files of one HAProxy
// instance (haproxy.conf and its crt-list), byte for byte deterministic,
// and plans how to move a running instance from one LoadBalancer to the
// next: runtime API commands when only members changed, a reload
// otherwise. Every word of every line goes through package encode.
package render

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"pier.dev/pier/internal/encode"
)

// Options are the node-level settings of a rendered instance. The zero
// value of every field but Dir means "the default".
type Options struct {
	// Dir is the load balancer's folder, <state>/haproxy/<uuid>. The agent
	// writes haproxy.conf, crt-list and certs/<certID>.pem there; HAProxy
	// creates the runtime socket haproxy.sock there.
	Dir string
	// MinSlots is the least number of server slots per backend (16).
	MinSlots int
	// HardStopAfter bounds how long old workers drain after a reload (60s).
	HardStopAfter time.Duration
	// MaxConn is the process-wide connection limit (4096).
	MaxConn  int
	Timeouts Timeouts
	// User and Group make HAProxy drop privileges; empty keeps them.
	User, Group string
	// MaxConfigBytes caps haproxy.conf (DefaultMaxConfigBytes, 16 MiB).
	// Config and PlanUpdate refuse a LoadBalancer whose file would be
	// larger, with an error wrapping ErrConfigTooLarge, so one huge
	// group cannot make the agent write, check and reload without bound
	// (RELIABILITY R13); the running configuration stays as it is.
	MaxConfigBytes int
}

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
// (stateDir/haproxy/<uuid>) leave room for HAProxy's socket paths, so a
// long --state-dir is refused at start-up rather than at the first render.
func CheckStateDir(stateDir string) error {
	const uuid = "00000000-0000-0000-0000-000000000000"
	dir := filepath.Join(stateDir, "haproxy", uuid)
	if err := encode.FilePath(dir).Err(); err != nil {
		return fmt.Errorf("state dir %s: %w", encode.Printable(stateDir), err)
	}
	if n := len(SocketPath(dir)); n > maxSocketPath {
		return fmt.Errorf("state dir %s is too long: HAProxy socket paths below it would be %d bytes, the limit is %d (Unix sockets); use a shorter path",
			encode.Printable(stateDir), n, maxSocketPath)
	}
	return nil
}

// maxSocketPath keeps room below sun_path's 108 bytes for the temporary
// name HAProxy binds first ("<path>.<pid>.tmp").
const maxSocketPath = 90

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
	if err := encode.FilePath(o.Dir).Err(); err != nil {
		return fmt.Errorf("options: dir: %w", err)
	}
	if n := len(SocketPath(o.Dir)); n > maxSocketPath {
		return fmt.Errorf("options: socket path is %d bytes, the limit is %d: use a shorter state folder", n, maxSocketPath)
	}
	if o.MinSlots < 1 || o.MinSlots > 4096 {
		return errors.New("options: MinSlots must be between 1 and 4096")
	}
	if o.MaxConn < 1 {
		return errors.New("options: MaxConn must be positive")
	}
	if o.MaxConfigBytes < 0 {
		return errors.New("options: MaxConfigBytes must not be negative")
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

// SocketPath is the runtime API socket of the instance in dir.
func SocketPath(dir string) string { return filepath.Join(dir, "haproxy.sock") }

// CrtListPath is the crt-list file of the instance in dir.
func CrtListPath(dir string) string { return filepath.Join(dir, "crt-list") }

// CertPath is where the agent writes certificate certID (PEM, key
// included) for the instance in dir. certID must be one of pier's
// identifiers; the result is checked to stay inside dir/certs (R2).
func CertPath(dir, certID string) (string, error) {
	if err := encode.ID("", certID).Err(); err != nil {
		return "", fmt.Errorf("certificate id: %w", err)
	}
	certs := filepath.Join(dir, "certs")
	p := filepath.Join(certs, certID+".pem")
	if filepath.Dir(p) != certs || filepath.Base(p) != certID+".pem" {
		return "", fmt.Errorf("certificate id %s escapes the certs folder", encode.Printable(certID))
	}
	return p, nil
}
