package testport

import (
	"net"
	"strconv"
	"testing"
)

func TestGetReturnsDistinctBindablePortsBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	limit := ephemeralStart()
	for range 200 {
		p := Get(t)
		if p < lowest || p >= limit {
			t.Fatalf("port %d outside %d-%d", p, lowest, limit-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	p := Get(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d handed out but not bindable: %v", p, err)
	}
	defer l.Close()
}

func TestBindableSeesAListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if bindable(l.Addr().(*net.TCPAddr).Port) {
		t.Fatal("a port with a listener reported bindable")
	}
}
