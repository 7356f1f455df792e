package model

import (
	"fmt"
	"strconv"
	"strings"
)

// AccessLog says which requests of a load balancer get an access-log
// line: one in Sample (1: every request); Sample 0 is none.
type AccessLog struct {
	Sample int
}

// MaxAccessLogSample bounds sample=N: one line in a million requests is
// already as good as none.
const MaxAccessLogSample = 999999

// AccessLogOn logs every request.
var AccessLogOn = AccessLog{Sample: 1}

// ParseAccessLog reads "on", "off" or "sample=N" (1 <= N <= 999999;
// sample=1 is on).
func ParseAccessLog(s string) (AccessLog, error) {
	switch s {
	case "on":
		return AccessLogOn, nil
	case "off":
		return AccessLog{}, nil
	}
	n, ok := strings.CutPrefix(s, "sample=")
	if !ok {
		return AccessLog{}, fmt.Errorf("access log %q: want on, off or sample=N", s)
	}
	v, err := strconv.Atoi(n)
	if err != nil || v < 1 || v > MaxAccessLogSample || strconv.Itoa(v) != n {
		return AccessLog{}, fmt.Errorf("access log %q: N must be a whole number from 1 to %d", s, MaxAccessLogSample)
	}
	return AccessLog{Sample: v}, nil
}

// String is the form ParseAccessLog reads.
func (a AccessLog) String() string {
	switch a.Sample {
	case 0:
		return "off"
	case 1:
		return "on"
	}
	return "sample=" + strconv.Itoa(a.Sample)
}

// Louder is the one of a and b that logs more requests: a group of
// Ingresses shares one frontend, so its most verbose member decides.
func (a AccessLog) Louder(b AccessLog) AccessLog {
	switch {
	case a.Sample == 0:
		return b
	case b.Sample == 0:
		return a
	case b.Sample < a.Sample:
		return b
	}
	return a
}

// AccessLogOf is lb's access logging: its annotation's, else def.
// A value that does not parse (a hand-written store) is def as well.
func AccessLogOf(lb *LoadBalancer, def AccessLog) AccessLog {
	if lb == nil || lb.AccessLog == "" {
		return def
	}
	a, err := ParseAccessLog(lb.AccessLog)
	if err != nil {
		return def
	}
	return a
}
