package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const tick = 5 * time.Millisecond

func TestWaitForAddress(t *testing.T) {
	boom := errors.New("connection refused")
	c := &recordingCluster{status: []statusAnswer{{}, {err: boom}, {}, ip("127.0.1.7")}}
	addr, err := waitForAddress(t.Context(), c, "ns", "ing", tick, time.Second)
	if err != nil || addr != "127.0.1.7" {
		t.Fatalf("got %q, %v; want the address after retries", addr, err)
	}
	if c.calls != 4 {
		t.Errorf("%d status reads, want 4", c.calls)
	}
}

func TestWaitForAddressTimeout(t *testing.T) {
	c := &recordingCluster{status: []statusAnswer{{}, {err: errors.New("pier API: 500")}, {}}}
	start := time.Now()
	_, err := waitForAddress(t.Context(), c, "ns", "ing", tick, 50*time.Millisecond)
	if err == nil {
		t.Fatal("no error without an address")
	}
	if !strings.Contains(err.Error(), "pier API: 500") {
		t.Errorf("error %q does not report the last read error", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > time.Second {
		t.Errorf("gave up after %s, want about the 50ms timeout", d)
	}
	if _, err := waitForAddress(t.Context(), c, "ns", "", tick, time.Second); err == nil {
		t.Error("no error without an Ingress")
	}
}

func TestWaitAddressAbsent(t *testing.T) {
	tests := []struct {
		name   string
		status []statusAnswer
		ok     bool
	}{
		{"stays empty", []statusAnswer{{}}, true},
		{"errors then empty", []statusAnswer{{err: errors.New("x")}, {}}, true},
		{"address appears late", []statusAnswer{{}, {}, {}, ip("127.0.1.9")}, false},
		{"address at once", []statusAnswer{ip("127.0.1.9")}, false},
		{"never readable", []statusAnswer{{err: errors.New("pier API: connection refused")}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &recordingCluster{status: tc.status}
			start := time.Now()
			err := waitAddressAbsent(t.Context(), c, "ns", "ing", tick, 60*time.Millisecond)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && time.Since(start) < 60*time.Millisecond {
				t.Errorf("passed after %s, before the whole timeout", time.Since(start))
			}
		})
	}
}
