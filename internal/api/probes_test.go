package api

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestProbes: /healthz answers Healthy and /readyz Ready, each 200 "ok"
// or 503 with the reason (the kubelet shows it in the pod's events);
// without Ready, /readyz answers as /healthz does.
func TestProbes(t *testing.T) {
	var healthErr, readyErr error
	s := &Server{Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Healthy: func() error { return healthErr }, Ready: func() error { return readyErr }}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	check := func(path string, wantCode int, wantBody string) {
		t.Helper()
		if code, body := get(path); code != wantCode || body != wantBody {
			t.Errorf("GET %s: %d %q, want %d %q", path, code, body, wantCode, wantBody)
		}
	}
	check("/healthz", http.StatusOK, "ok")
	check("/readyz", http.StatusOK, "ok")
	readyErr = errors.New("3 load balancers placed here are not applied yet")
	check("/readyz", http.StatusServiceUnavailable, readyErr.Error())
	check("/healthz", http.StatusOK, "ok")
	healthErr = errors.New("the agent's loop has not turned for 31s")
	check("/healthz", http.StatusServiceUnavailable, healthErr.Error())

	s.Ready = nil
	check("/readyz", http.StatusServiceUnavailable, healthErr.Error())
}
