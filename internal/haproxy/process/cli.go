package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

const (
	defaultCLITimeout = 10 * time.Second
	attemptTimeout    = 2 * time.Second
	maxAnswer         = 64 << 20 // `show servers state` of a large shard is big, but bounded
)

// Proc is one line of the master CLI's `show proc`.
type Proc struct {
	PID  int
	Type string // "master" or "worker"
	// Old marks a worker of an earlier generation that is still draining.
	Old bool
	// Reloads is, for the master, the number of reloads since it started;
	// for a worker, the number of reloads it has survived (0 = current).
	Reloads int
	// FailedReloads (master only) counts failed reloads since the last
	// successful one: "[failed: N]".
	FailedReloads int
	Uptime        time.Duration
	Version       string
}

type procStatus struct {
	master  Proc
	workers []Proc
}

func (s procStatus) current() []Proc {
	var cur []Proc
	for _, w := range s.workers {
		if !w.Old {
			cur = append(cur, w)
		}
	}
	return cur
}

// singleCommand accepts one runtime API command and nothing else: a newline
// or ';' would smuggle in a second command, and control characters have no
// business in one.
func singleCommand(cmd string) error {
	if strings.TrimSpace(cmd) == "" {
		return errors.New("runtime command: empty")
	}
	for _, r := range cmd {
		if r == ';' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("runtime command: refused character %q", r)
		}
	}
	return nil
}

// exchange sends one command line to a HAProxy CLI socket and reads the
// answer until HAProxy closes. The write side is shut down after the command:
// the master CLI in 2.6 waits for it before answering.
func exchange(ctx context.Context, path, cmd string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCLITimeout)
		defer cancel()
	}
	conn, err := dialCLI(ctx, path, cmd)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	b, err := io.ReadAll(io.LimitReader(conn, maxAnswer))
	if err != nil {
		return "", fmt.Errorf("%s: %q: %w", path, cmd, err)
	}
	return string(b), nil
}

func dialCLI(ctx context.Context, path, cmd string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	conn := c.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %q: %w", path, cmd, err)
	}
	if err := conn.CloseWrite(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %q: %w", path, cmd, err)
	}
	return conn, nil
}

// sendReload sends `reload` to the master CLI. The master closes the
// connection when it re-executes; errors after the command was written are
// not failures, the caller learns the outcome from `show proc`.
func sendReload(ctx context.Context, sock string) error {
	conn, err := dialCLI(ctx, sock, "reload")
	if err != nil {
		return fmt.Errorf("send reload: %w", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(attemptTimeout))
	_, _ = io.Copy(io.Discard, conn)
	return nil
}

// showProc asks the master CLI for `show proc`, bounding the attempt so a
// master that is busy re-executing is retried rather than waited on.
func showProc(ctx context.Context, sock string) (procStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	out, err := exchange(ctx, sock, "show proc")
	if err != nil {
		return procStatus{}, err
	}
	return parseShowProc(out)
}

// parseShowProc parses 2.6's `show proc`:
//
//	#<PID>          <type>          <reloads>       <uptime>        <version>
//	8271            master          2 [failed: 1]   0d00h10m28s     2.6.12-1+deb12u4
//	# workers
//	25217           worker          0               0d00h00m17s     2.6.12-1+deb12u4
//	# old workers
//	24100           worker          1               0d00h01m02s     2.6.12-1+deb12u4
//	# programs
func parseShowProc(out string) (procStatus, error) {
	var st procStatus
	section := "master"
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#<"):
			continue
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimPrefix(line, "#"))
			continue
		case section == "programs":
			continue
		}
		p, err := parseProcLine(line)
		if err != nil {
			return procStatus{}, err
		}
		switch {
		case section == "master" && p.Type == "master":
			st.master = p
		case p.Type == "worker" && (section == "workers" || section == "old workers"):
			p.Old = section == "old workers"
			st.workers = append(st.workers, p)
		}
	}
	if st.master.PID == 0 {
		return procStatus{}, fmt.Errorf("show proc: no master line in %q", out)
	}
	return st, nil
}

func parseProcLine(line string) (Proc, error) {
	f := strings.Fields(line)
	bad := fmt.Errorf("show proc: unexpected line %q", line)
	if len(f) < 4 {
		return Proc{}, bad
	}
	var p Proc
	var err1, err2 error
	p.PID, err1 = strconv.Atoi(f[0])
	p.Type = f[1]
	p.Reloads, err2 = strconv.Atoi(f[2])
	rest := f[3:]
	if len(rest) >= 2 && rest[0] == "[failed:" {
		var err error
		if p.FailedReloads, err = strconv.Atoi(strings.TrimSuffix(rest[1], "]")); err != nil {
			return Proc{}, bad
		}
		rest = rest[2:]
	}
	if err1 != nil || err2 != nil || len(rest) == 0 {
		return Proc{}, bad
	}
	p.Uptime = parseUptime(rest[0])
	if len(rest) > 1 {
		p.Version = rest[1]
	}
	return p, nil
}

// parseUptime parses "1d02h03m04s"; an unknown form yields 0, the uptime is
// informative only.
func parseUptime(s string) time.Duration {
	var d, h, m, sec int
	if _, err := fmt.Sscanf(s, "%dd%dh%dm%ds", &d, &h, &m, &sec); err != nil {
		return 0
	}
	return time.Duration(d)*24*time.Hour + time.Duration(h)*time.Hour +
		time.Duration(m)*time.Minute + time.Duration(sec)*time.Second
}
