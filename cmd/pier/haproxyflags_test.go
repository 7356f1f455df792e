package main

import (
	"flag"
	"io"
	"log/slog"
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
