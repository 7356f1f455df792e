package haproxydriver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// keepAlive is one client connection that sends HTTP/1.1 requests, which
// keep the connection open by default.
type keepAlive struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialKeepAlive(t *testing.T, lb *model.LoadBalancer) *keepAlive {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(lb.VIP, strconv.Itoa(lb.Listeners[0].Port)), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &keepAlive{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// get sends one request and reports whether the response asked to close
// ("Connection: close") and whether HAProxy then closed the connection.
func (k *keepAlive) get() (askedClose, closed bool) {
	k.t.Helper()
	_ = k.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(k.conn, "GET / HTTP/1.1\r\nHost: drain.test\r\n\r\n"); err != nil {
		k.t.Fatal(err)
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		k.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		k.t.Fatalf("status %d", resp.StatusCode)
	}
	// A closed connection reads EOF at once; an open one times out.
	_ = k.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = k.r.ReadByte()
	var ne net.Error
	open := errors.As(err, &ne) && ne.Timeout()
	return resp.Close, !open
}

// wantDrain checks a fresh connection: both answers equal on.
func wantDrain(t *testing.T, lb *model.LoadBalancer, on bool, when string) {
	t.Helper()
	asked, closed := dialKeepAlive(t, lb).get()
	if asked != on || closed != on {
		t.Fatalf("%s: Connection: close %v, connection closed %v; want %v", when, asked, closed, on)
	}
}

// TestDrain checks the switch on a keep-alive client with real HAProxy:
// off, a connection stays open; on, the next response on an already
// open connection asks to close and HAProxy closes it; a reload and a
// start while draining keep draining; off again restores keep-alive.
func TestDrain(t *testing.T) {
	needHAProxy(t)
	ctx := context.Background()
	d := newDriver(t, harness.ShortTempDir(t))
	t.Cleanup(func() { d.Close(true) })
	lb := lbWith(3, freePort(t), memberAt(echo(t, "127.0.0.1:0", "three")))
	if _, err := d.Apply(ctx, lb); err != nil {
		t.Fatal(err)
	}
	wantDrain(t, lb, false, "before Drain")

	client := dialKeepAlive(t, lb)
	if asked, closed := client.get(); asked || closed {
		t.Fatal("first response on a kept-alive connection closed it")
	}
	if err := d.Drain(ctx, true); err != nil {
		t.Fatal(err)
	}
	if asked, closed := client.get(); !asked || !closed {
		t.Fatalf("open connection while draining: Connection: close %v, closed %v", asked, closed)
	}
	wantDrain(t, lb, true, "new connection while draining")

	if err := d.lbs[lb.UUID].sh.proc.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	wantDrain(t, lb, true, "after a reload while draining")
	other := lbWith(4, freePort(t), memberAt(echo(t, "127.0.0.1:0", "four")))
	if _, err := d.Apply(ctx, other); err != nil {
		t.Fatal(err)
	}
	wantDrain(t, other, true, "a process started while draining")

	if err := d.Drain(ctx, false); err != nil {
		t.Fatal(err)
	}
	wantDrain(t, lb, false, "after Drain off")
	wantDrain(t, other, false, "after Drain off (second process)")
	if err := d.lbs[lb.UUID].sh.proc.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	wantDrain(t, lb, false, "after a reload with drain off")
}
