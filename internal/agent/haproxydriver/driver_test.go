package haproxydriver

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/driver/drivertest"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/testport"
	"pier.dev/pier/test/harness"
)

type noSecrets struct{}

func (noSecrets) TLSPair(string, string) ([]byte, []byte, error) { return nil, nil, os.ErrNotExist }
func (noSecrets) Data(string, string) (map[string][]byte, error) { return nil, os.ErrNotExist }

func needHAProxy(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy not installed")
	}
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
}

func newDriver(t *testing.T, stateDir string) *Driver {
	t.Helper()
	return newSharded(t, stateDir, 0)
}

// newSharded returns a driver packing load balancers into processes
// HAProxy processes (0: one per load balancer).
func newSharded(t *testing.T, stateDir string, processes int) *Driver {
	t.Helper()
	d, err := New(Config{StateDir: stateDir, Secrets: noSecrets{}, Metrics: metrics.New(), Processes: processes,
		Render: render.Options{HardStopAfter: 2 * time.Second, MinSlots: 8},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// echo serves its name on addr (host:0 for any port) until t ends.
func echo(t *testing.T, addr, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func freePort(t *testing.T) int {
	t.Helper()
	return testport.Get(t)
}

func memberAt(addr string) model.Member {
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return model.Member{Address: host, Port: n, Weight: 1}
}

func lbWith(n, port int, members ...model.Member) *model.LoadBalancer {
	return &model.LoadBalancer{
		UUID: fmt.Sprintf("0f8a2d3e-1111-4222-8333-4444555566%02d", n), Name: "ns/lb-" + strconv.Itoa(n),
		Provider: model.ProviderHAProxy, VIP: "127.0.0.1", Placement: model.Placement{Active: "n1"},
		Listeners: []model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: port, DefaultPoolID: "p1"}},
		Pools:     []model.Pool{{ID: "p1", Name: "ns_web_80", Members: members}},
	}
}

// get returns the body served on lb's listener, or "" on any error.
func get(lb *model.LoadBalancer) string { return getHost(lb, "") }

// TestContract runs the driver contract against real HAProxy, one
// process per load balancer.
func TestContract(t *testing.T) {
	needHAProxy(t)
	runContract(t, func(t *testing.T, dir string) driver.Driver { return newDriver(t, dir) })
}

func runContract(t *testing.T, newDriver func(t *testing.T, dir string) driver.Driver) {
	var mu sync.Mutex
	names := map[string]string{} // member address -> the name it serves
	backend := func(t *testing.T, name string) model.Member {
		addr := echo(t, "127.0.0.1:0", name)
		mu.Lock()
		names[addr] = name
		mu.Unlock()
		return memberAt(addr)
	}
	serves := func(lb *model.LoadBalancer) string {
		m := lb.Pools[0].Members[0]
		mu.Lock()
		defer mu.Unlock()
		return names[net.JoinHostPort(m.Address, strconv.Itoa(m.Port))]
	}
	drivertest.Run(t, drivertest.Harness{
		New:      newDriver,
		StateDir: func(t *testing.T) string { return harness.ShortTempDir(t) },
		LB: func(t *testing.T, n int) *model.LoadBalancer {
			return lbWith(n, freePort(t), backend(t, "lb"+strconv.Itoa(n)))
		},
		Change: func(t *testing.T, lb *model.LoadBalancer) *model.LoadBalancer {
			next := lb.Clone()
			next.Pools[0].Members = []model.Member{backend(t, lb.Name+"-changed")}
			return next
		},
		Break: func(lb *model.LoadBalancer) *model.LoadBalancer {
			bad := lb.Clone()
			bad.Pools[0].Members[0].Address = "10.0.0.1 check"
			return bad
		},
		Serving: func(_ *testing.T, lb *model.LoadBalancer) bool { return get(lb) == serves(lb) },
		Stopped: func(_ *testing.T, lb *model.LoadBalancer) bool {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(lb.VIP, strconv.Itoa(lb.Listeners[0].Port)), time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil
		},
	})
}
