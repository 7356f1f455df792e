// Package testport hands tests TCP ports on loopback that nothing else is
// likely to take before the test's own server binds them.
//
// The usual trick, listening on port 0 and closing, returns a port from the
// kernel's ephemeral range. The kernel hands the same range out as source
// ports for outgoing connections, and HAProxy's health checks and the tests'
// clients make thousands of them, so a port returned that way is often taken
// again by the time HAProxy binds it ("Address already in use"). Ports below
// the ephemeral range are never handed out implicitly: only another test
// choosing the same port at random can collide, and each candidate is
// checked free before it is returned.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the first port handed out: above the well-known and commonly
// configured service ports of a development machine.
const lowest = 10000

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports this process has handed out
)

// Get returns a free loopback port below the ephemeral range, never the
// same one twice in one process.
func Get(t testing.TB) int {
	t.Helper()
	p, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Free is Get for code without a testing.TB.
func Free() (int, error) {
	highest := ephemeralStart() - 1
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := lowest + rand.IntN(highest-lowest+1)
		if given[p] || !bindable(p) {
			continue
		}
		given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 1000 tries", lowest, highest)
}

// bindable reports whether p can be listened on at 127.0.0.1 and on the
// wildcard address (a server bound to either blocks the other).
func bindable(p int) bool {
	for _, host := range []string{"127.0.0.1", "0.0.0.0"} {
		l, err := net.Listen("tcp4", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// ephemeralStart is the first port of the kernel's ephemeral range, 32768
// when it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n <= lowest+1000 {
		return 32768
	}
	return n
}
