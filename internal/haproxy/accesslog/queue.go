package accesslog

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Queue depth. A Unix datagram socket queues at most
// net.unix.max_dgram_qlen datagrams (10 by default), taken when the
// socket is created, whatever its buffer: at 5,000 requests a second
// that is 2 ms of lines, and a reader that waits longer for a CPU (the
// machine is busy serving those requests) loses lines: 5 % of them in
// TestAccessLogReaderStopped's load on two busy cores. With wantQlen the
// bound is rather the sending HAProxy's socket buffer (208 KiB: a
// hundred or two lines in flight per process, tens of milliseconds).
//
// Only root may raise it, and the setting is the network namespace's:
// listen raises it just for the creation of its own socket and puts
// the old value back at once, so no other socket is changed.
const wantQlen = 1024

const qlenPath = "/proc/sys/net/unix/max_dgram_qlen"

// qlenMu keeps two Logs of one process (pier run --nodes) from
// restoring each other's raised value.
var qlenMu sync.Mutex

// listen binds a Unix datagram socket at path with a queue of wantQlen
// datagrams where it can.
func listen(path string, logger *slog.Logger) (*net.UnixConn, error) {
	qlenMu.Lock()
	defer qlenMu.Unlock()
	restore, err := raiseQlen(wantQlen)
	if err != nil {
		logger.Info("access log socket keeps the default queue of net.unix.max_dgram_qlen datagrams; lines may drop under load (run the agent as root to raise it)", "error", err)
	}
	conn, lerr := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if restore != nil {
		if err := restore(); err != nil {
			logger.Warn("could not put net.unix.max_dgram_qlen back", "error", err)
		}
	}
	return conn, lerr
}

// raiseQlen sets max_dgram_qlen to want if it is lower and returns how
// to put it back (nil when it was high enough).
func raiseQlen(want int) (restore func() error, err error) {
	b, err := os.ReadFile(qlenPath)
	if err != nil {
		return nil, err
	}
	old := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(old)
	if err != nil {
		return nil, errors.New(qlenPath + ": " + old)
	}
	if n >= want {
		return nil, nil
	}
	if err := os.WriteFile(qlenPath, []byte(strconv.Itoa(want)), 0o644); err != nil {
		return nil, err
	}
	return func() error { return os.WriteFile(qlenPath, []byte(old), 0o644) }, nil
}
