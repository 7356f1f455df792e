package main

import (
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestHAProxyFlagsRetryEmptyResponse: the empty-response retry is on by
// default and --retry-empty-response=false turns it off in the render
// options.
func TestHAProxyFlagsRetryEmptyResponse(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		noEmpty bool
	}{
		{nil, false},
		{[]string{"--retry-empty-response=false"}, true},
		{[]string{"--retry-empty-response"}, false},
	} {
		var h haproxyFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		h.register(fs)
		if err := fs.Parse(append([]string{"--haproxy-user="}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		opts, err := h.render(slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if opts.NoEmptyResponseRetry != tc.noEmpty {
			t.Errorf("%v: NoEmptyResponseRetry %v, want %v", tc.args, opts.NoEmptyResponseRetry, tc.noEmpty)
		}
	}
}

// TestHAProxyFlagsTrustedProxies: --trusted-proxies reaches the render
// and landing options sorted and deduplicated; a bare address is its
// own network; host bits, garbage and a zone are refused.
func TestHAProxyFlagsTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		value, want string // want: the prefixes joined by " ", or "error"
	}{
		{"", ""},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{" 192.0.2.7 , 10.0.0.0/8,2001:db8::/32,10.0.0.0/8", "10.0.0.0/8 192.0.2.7/32 2001:db8::/32"},
		{"2001:db8::1", "2001:db8::1/128"},
		{"10.1.2.3/8", "error"},
		{"example.com", "error"},
		{"fe80::1%eth0", "error"},
		{"::ffff:10.0.0.0/104", "error"},
	} {
		var h haproxyFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		h.register(fs)
		if err := fs.Parse([]string{"--haproxy-user=", "--trusted-proxies=" + tc.value}); err != nil {
			t.Fatal(err)
		}
		opts, err := h.render(slog.New(slog.NewTextHandler(io.Discard, nil)))
		landing, lerr := h.landingOptions(80)
		if tc.want == "error" {
			if err == nil || lerr == nil {
				t.Errorf("%q: accepted", tc.value)
			}
			continue
		}
		if err != nil || lerr != nil {
			t.Fatalf("%q: %v, %v", tc.value, err, lerr)
		}
		var got []string
		for _, p := range opts.TrustedProxies {
			got = append(got, p.String())
		}
		if strings.Join(got, " ") != tc.want || !slices.Equal(opts.TrustedProxies, landing.TrustedProxies) {
			t.Errorf("%q: render %q, landing %v; want %q", tc.value, got, landing.TrustedProxies, tc.want)
		}
	}
}
