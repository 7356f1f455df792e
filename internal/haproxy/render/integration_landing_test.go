package render

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// startLanding starts a landing process on port with backends spare
// backends of 4 slots, and returns its folder and options.
func startLanding(t *testing.T, bin string, backends, port int) (layout.Process, LandingOptions) {
	t.Helper()
	dir := t.TempDir()
	at := layout.Process{Dir: dir, Global: filepath.Join(dir, "global.conf")}
	o := LandingOptions{Port: port, Backends: backends, Slots: 4, BackendMaxConn: DefaultBackendMaxConn}
	writeLandingFiles(t, at, o)
	global, err := Global(Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, at.Global, global)
	proc, err := ProcessConf(at, false)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, at.Conf(), proc)
	cfg, err := LandingConfig(at, o)
	if err != nil {
		t.Fatal(err)
	}
	all := filepath.Join(dir, "all.conf")
	writeFile(t, all, append(append(append(global, '\n'), proc...), cfg...))
	startHAProxy(t, bin, all, o.Port)
	// The port may be another process's already (a shard on 127.0.0.1):
	// the landing is up once its runtime socket answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("unix", at.Socket())
		if err == nil {
			conn.Close()
			return at, o
		}
		if time.Now().After(deadline) {
			t.Fatalf("landing socket: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// land renders lb (listener port and addresses already set) and sends
// its landing commands; it returns the plan.
func land(t *testing.T, at layout.Process, o LandingOptions, lb *model.LoadBalancer, id int, spares []int) LandingPlan {
	t.Helper()
	r, err := Render(lb, layout.LB{UUID: lb.UUID, Dir: t.TempDir()}, nil, Options{MinSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	if reason := Landable(r, o); reason != "" {
		t.Fatalf("not landable: %s", reason)
	}
	plan, err := PlanLanding(r, at, o, id, spares)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan.Land {
		runtimeCommand(t, at.Socket(), c.String())
	}
	return plan
}

// TestLandingListenerPreference proves what the landing builds on, with
// two HAProxy processes on one port: a connection to an address a shard
// binds goes to the shard even when the landing's wildcard listener
// knows the address too; one to a landed address goes to the landing;
// one to an address nobody has is closed without an answer.
func TestLandingListenerPreference(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	// The shard first: once the landing listens, a connection to any
	// address of the port succeeds, so startHAProxy could not tell that
	// the shard listens.
	shardPool := landingPool("shard", memberAt(startBackend(t, "shard")))
	shardLB := newLB([]model.Listener{httpListener(shardPool.ID, nil)}, shardPool)
	shardLB.Listeners[0].Port, shardLB.VIP, shardLB.FIP = freePort(), "127.0.0.1", ""
	serveOn(t, bin, shardLB)
	at, o := startLanding(t, bin, 2, shardLB.Listeners[0].Port)
	landedPool := landingPool("landed", memberAt(startBackend(t, "landed")))
	landed := newLB([]model.Listener{httpListener(landedPool.ID, nil)}, landedPool)
	landed.UUID = "6f0c6a9e-0d7e-4b1a-9c51-2b7c1e0a4d11"
	landed.Listeners[0].Port, landed.VIP, landed.FIP = o.Port, "127.0.0.2", ""
	land(t, at, o, landed, 1, []int{0})
	port := strconv.Itoa(o.Port)
	get := func(addr string) *http.Response {
		return rawRequest(t, net.JoinHostPort(addr, port), "127.0.0.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	if resp := get("127.0.0.2"); resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "landed" || !resp.Close {
		t.Fatalf("landed address: %d %q close=%v", resp.StatusCode, resp.Header.Get("X-Backend"), resp.Close)
	}
	if resp := get("127.0.0.1"); resp.Header.Get("X-Backend") != "shard" || resp.Close {
		t.Fatalf("shard's address: %d %q close=%v", resp.StatusCode, resp.Header.Get("X-Backend"), resp.Close)
	}
	if answered(t, net.JoinHostPort("127.0.0.3", port)) {
		t.Fatal("the landing answered for an address nobody landed")
	}
	// The landing knows the shard's address too (a load balancer folded
	// in, not yet unbound): the shard's specific listener still takes
	// every connection.
	same := landed.Clone()
	same.UUID, same.VIP = "7f0c6a9e-0d7e-4b1a-9c51-2b7c1e0a4d12", "127.0.0.1"
	land(t, at, o, same, 2, []int{1})
	for range 20 {
		if resp := get("127.0.0.1"); resp.Header.Get("X-Backend") != "shard" {
			t.Fatalf("with the landing knowing it, the shard's address was served by %q", resp.Header.Get("X-Backend"))
		}
	}
}

// serveOn starts lb (port and addresses set) as a process of its own.
func serveOn(t *testing.T, bin string, lb *model.LoadBalancer) {
	t.Helper()
	startLB(t, bin, lb, Options{MinSlots: 4}, nil, lb.Listeners[0].Port)
}

// answered reports whether a request to addr got any response bytes.
func answered(t *testing.T, addr string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_, err = bufio.NewReader(conn).ReadByte()
	return err == nil
}

// TestLandingEquivalence: load balancers served through the landing
// answer a table of requests as their own fragments do: same status,
// same backend. All land in one landing process under distinct ids and
// addresses, so the table also shows that their entries stay apart.
func TestLandingEquivalence(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	be := map[string]model.Pool{}
	for _, name := range []string{"a", "b", "c", "d"} {
		be[name] = landingPool(name, memberAt(startBackend(t, name)))
	}
	fixtures := []struct {
		name string
		lb   *model.LoadBalancer
	}{
		{"virtual hosts, exact and prefix, 404", newLB([]model.Listener{httpListener("", routes(
			toPool(be["a"], hostIs("shop.example"), pathIs("/cart")),
			reject(hostIs("shop.example"), pathIs("/admin")),
			toPool(be["b"], hostIs("shop.example"), pathPrefix("/cart")),
			toPool(be["c"], hostIs("blog.example"), pathPrefix("/")),
			toPool(be["d"], hostWild("*.shop.example"), pathPrefix("/")),
		))}, be["a"], be["b"], be["c"], be["d"])},
		{"host-less with a catch-all", newLB([]model.Listener{httpListener("", routes(
			toPool(be["a"], pathIs("/x")),
			toPool(be["b"], pathPrefix("/api")),
			toPool(be["c"], pathPrefix("/")),
		))}, be["a"], be["b"], be["c"])},
		{"default backend only", newLB([]model.Listener{httpListener(be["d"].ID, nil)}, be["d"])},
		{"precedence and a default backend", newLB([]model.Listener{httpListener(be["d"].ID, routes(
			toPool(be["c"], hostIs("app.example"), pathIs("/a/b/c")),
			toPool(be["b"], hostIs("app.example"), pathPrefix("/a/b")),
			toPool(be["a"], hostIs("app.example"), pathPrefix("/a")),
			toPool(be["c"], pathPrefix("/static")),
		))}, be["a"], be["b"], be["c"], be["d"])},
	}
	requests := []string{
		"GET /cart HTTP/1.1\r\nHost: shop.example\r\n\r\n",
		"GET /cart/ HTTP/1.1\r\nHost: shop.example\r\n\r\n",
		"GET /cart/x HTTP/1.1\r\nHost: SHOP.example.:80\r\n\r\n",
		"GET /cartx HTTP/1.1\r\nHost: shop.example\r\n\r\n",
		"GET /admin HTTP/1.1\r\nHost: shop.example\r\n\r\n",
		"GET /admin/x HTTP/1.1\r\nHost: shop.example\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: blog.example\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: a.shop.example\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: a.b.shop.example\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: any.example\r\n\r\n",
		"GET /x/ HTTP/1.1\r\nHost: any.example\r\n\r\n",
		"GET /api/v1 HTTP/1.1\r\nHost: any.example\r\n\r\n",
		"GET /apix HTTP/1.1\r\nHost: any.example\r\n\r\n",
		"GET /a/b/c HTTP/1.1\r\nHost: app.example\r\n\r\n",
		"GET /a/b/c/d HTTP/1.1\r\nHost: app.example\r\n\r\n",
		"GET /a/bc HTTP/1.1\r\nHost: app.example\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: app.example\r\n\r\n",
		"GET /static/x.css HTTP/1.1\r\nHost: app.example\r\n\r\n",
		"GET /other HTTP/1.1\r\nHost: app.example\r\n\r\n",
		"GET /cart HTTP/1.1\r\n\r\n",
		"GET /cart HTTP/1.0\r\n\r\n",
		"GET //cart HTTP/1.1\r\nHost: shop.example\r\n\r\n",
		"GET /%61pi HTTP/1.1\r\nHost: any.example\r\n\r\n",
		"GET /a/../cart HTTP/1.1\r\nHost: app.example\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: a/b.example\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: any.example\r\nX-Bad: a\x01b\r\n\r\n",
	}
	at, o := startLanding(t, bin, 16, freePort())
	spare := 0
	for i, f := range fixtures {
		own := f.lb.Clone()
		own.Listeners[0].Port, own.VIP, own.FIP = freePort(), "127.0.0.1", ""
		serveOn(t, bin, own)
		landed := f.lb.Clone()
		landed.Listeners[0].Port, landed.VIP, landed.FIP = o.Port, "127.0.0."+strconv.Itoa(20+i), ""
		spares := make([]int, len(landed.Pools))
		for j := range spares {
			spares[j], spare = spare, spare+1
		}
		land(t, at, o, landed, i+3, spares)
		for _, req := range requests {
			want := rawRequest(t, "127.0.0.1:"+strconv.Itoa(own.Listeners[0].Port), "127.0.0.1", req)
			got := rawRequest(t, net.JoinHostPort(landed.VIP, strconv.Itoa(o.Port)), "127.0.0.1", req)
			if got.StatusCode != want.StatusCode || got.Header.Get("X-Backend") != want.Header.Get("X-Backend") ||
				got.Header.Get("Server") != want.Header.Get("Server") || got.Header.Get("X-Seen-Proto") != want.Header.Get("X-Seen-Proto") {
				t.Errorf("%s: %q: landing %d %q, own fragment %d %q", f.name, req, got.StatusCode, got.Header.Get("X-Backend"),
					want.StatusCode, want.Header.Get("X-Backend"))
			}
			if !got.Close {
				t.Errorf("%s: %q: the landing's answer keeps the connection open", f.name, req)
			}
		}
	}
}
