package process

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// TestStopWithinBoundsTheDrain: a connection left open mid-request holds
// a soft stop until the client's timeout (10 s here); StopWithin stops
// the process hard once its grace has passed, and it is gone.
func TestStopWithinBoundsTheDrain(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	pid := i.PID()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", e.port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Half a request: HAProxy waits for the rest, so the soft stop does.
	if _, err := fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	const grace = 500 * time.Millisecond
	began := time.Now()
	if err := i.StopWithin(context.Background(), grace); err != nil {
		t.Fatalf("StopWithin: %v", err)
	}
	took := time.Since(began)
	waitGone(t, pid, 2*time.Second)
	if took < grace || took > grace+3*time.Second {
		t.Errorf("StopWithin(%s) took %s: want the grace, then the hard stop's moment", grace, took)
	}
	t.Logf("a soft stop held by an open request ended by the hard stop after %s", took.Round(time.Millisecond))
}
