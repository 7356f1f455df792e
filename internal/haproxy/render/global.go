package render

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
)

// Global renders global.conf: the global and defaults sections every
// HAProxy process loads first, before its process.conf and the fragments
// of the load balancers it runs. It depends on opts only.
func Global(opts Options) ([]byte, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	var c encode.Config
	c.Comment(encode.Lit("pier"), encode.Lit("global"), encode.Lit("settings"), encode.Lit("of"),
		encode.Lit("every"), encode.Lit("haproxy"), encode.Lit("process"))
	c.Comment(encode.Lit("generated;"), encode.Lit("do"), encode.Lit("not"), encode.Lit("edit"))
	writeGlobal(&c, opts)
	writeDefaults(&c, opts)
	out, err := c.Bytes()
	if err != nil {
		return nil, fmt.Errorf("render global: %w", err)
	}
	return out, nil
}

// ProcessConf renders process.conf: a second global section (HAProxy
// merges them) holding what must differ between processes, so that
// global.conf stays one file for all of them. draining is the drain
// switch's value at start (see drainVar).
func ProcessConf(p layout.Process, draining bool) ([]byte, error) {
	if err := p.CheckSocket(); err != nil {
		return nil, fmt.Errorf("render process: %w", err)
	}
	var c encode.Config
	c.Comment(encode.Lit("pier"), encode.Lit("haproxy"), encode.Lit("process;"), encode.Lit("generated;"),
		encode.Lit("do"), encode.Lit("not"), encode.Lit("edit"))
	c.Blank()
	c.Section(encode.Lit("global"))
	// expose-fd listeners lets a new worker take the listening sockets
	// over, so a reload refuses no connection (process's
	// TestReloadUnderLoadZeroErrors holds it).
	c.Line(encode.Lit("stats"), encode.Lit("socket"), encode.FilePath(p.Socket()),
		encode.Lit("mode"), encode.Lit("600"), encode.Lit("level"), encode.Lit("admin"),
		encode.Lit("expose-fd"), encode.Lit("listeners"))
	drainInit(&c, draining)
	out, err := c.Bytes()
	if err != nil {
		return nil, fmt.Errorf("render process: %w", err)
	}
	return out, nil
}

func writeGlobal(c *encode.Config, o Options) {
	c.Blank()
	c.Section(encode.Lit("global"))
	c.Line(encode.Lit("maxconn"), encode.Num(o.MaxConn))
	// HAProxy asks the kernel for twice maxconn file descriptors plus one
	// per listener and per health check. Thousands of load balancers in
	// one process can need more than the hard RLIMIT_NOFILE a container
	// is given, and HAProxy 2.6 then refuses to load the config at all
	// (strict-limits is its default), so every later change is refused.
	// Without it HAProxy warns and runs within the limit; the process
	// package reports the shortfall (log line and metric).
	c.Line(encode.Lit("no"), encode.Lit("strict-limits"))
	// Old workers drain for at most this long after a reload.
	c.Line(encode.Lit("hard-stop-after"), encode.Millis(o.HardStopAfter))
	if o.User != "" {
		c.Line(encode.Lit("user"), encode.Account(o.User))
	}
	if o.Group != "" {
		c.Line(encode.Lit("group"), encode.Account(o.Group))
	}
	// Spelled out although they are 2.6's defaults, so an upgrade or a
	// build option cannot move them: a request head larger than
	// bufsize - maxrewrite (15 KiB) or with more than 100 headers gets
	// a 400 from HAProxy before any rule runs.
	c.Line(encode.Lit("tune.bufsize"), encode.Num(16384))
	c.Line(encode.Lit("tune.maxrewrite"), encode.Num(1024))
	c.Line(encode.Lit("tune.http.maxhdr"), encode.Num(101))
	c.Line(encode.Lit("ssl-default-bind-options"), encode.Lit("ssl-min-ver"), encode.Lit("TLSv1.2"), encode.Lit("no-tls-tickets"))
}

func writeDefaults(c *encode.Config, o Options) {
	t := o.Timeouts
	writeTCPDefaults(c, t)
	c.Blank()
	c.Section(encode.Lit("defaults"))
	c.Line(encode.Lit("mode"), encode.Lit("http"))
	// A connection refused by a member is retried on another one; with
	// slots refilled through the runtime API, a member that just left
	// must not cost a request.
	c.Line(encode.Lit("option"), encode.Lit("redispatch"))
	c.Line(encode.Lit("retries"), encode.Num(3))
	// No response-timeout: it would replay a request the server may
	// already have acted on (a POST that timed out is not safe to resend).
	// empty-response (a kept-alive server connection closed as the request
	// went out, as a member that shuts down does) makes HAProxy keep a
	// copy of every request; conn-failure alone needs none. The copy is
	// the dearest of pier's extras, 2-3.4 µs a request, about a tenth of
	// the proxy's CPU (docs/benchmarks.md, "The extras, priced"), so an
	// operator may trade the retry for it (--retry-empty-response).
	retryOn := []encode.Word{encode.Lit("retry-on"), encode.Lit("conn-failure")}
	if !o.NoEmptyResponseRetry {
		retryOn = append(retryOn, encode.Lit("empty-response"))
	}
	c.Line(retryOn...)
	// Measured: with it, keep-alive clients see no error across reloads.
	c.Line(encode.Lit("option"), encode.Lit("idle-close-on-response"))
	// No "option forwardfor": it appends after the client's own
	// X-Forwarded-For; each HTTP frontend sets its forwarding headers
	// (forwarding.go).
	// Header names outside [A-Za-z0-9-] are dropped, as nginx does with
	// underscores: "X_Forwarded_For" must not reach a backend that maps
	// "_" to "-".
	c.Line(encode.Lit("option"), encode.Lit("http-restrict-req-hdr-names"), encode.Lit("delete"))
	writeTimeouts(c, t, true)
}

// writeTimeouts writes a defaults section's timeouts; the HTTP ones
// (request, keep-alive) only for HTTP proxies.
func writeTimeouts(c *encode.Config, t Timeouts, http bool) {
	timeout := func(name encode.Word, d encode.Word) { c.Line(encode.Lit("timeout"), name, d) }
	timeout(encode.Lit("connect"), encode.Millis(t.Connect))
	timeout(encode.Lit("client"), encode.Millis(t.Client))
	timeout(encode.Lit("server"), encode.Millis(t.Server))
	if http {
		timeout(encode.Lit("http-request"), encode.Millis(t.HTTPRequest))
		timeout(encode.Lit("http-keep-alive"), encode.Millis(t.KeepAlive))
	}
	timeout(encode.Lit("queue"), encode.Millis(t.Queue))
	timeout(encode.Lit("tunnel"), encode.Millis(t.Tunnel))
}

// tcpDefaults names the defaults of the TCP proxies of ssl-passthrough
// ("from pier_tcp"). HTTP options such as forwardfor cannot be negated
// in a proxy and make a TCP one warn (zero-warning), so TCP proxies take
// their own defaults. It comes before the anonymous section: a proxy
// without "from" takes the last defaults section, the HTTP one.
var tcpDefaults = encode.Lit("pier_tcp")

func writeTCPDefaults(c *encode.Config, t Timeouts) {
	c.Blank()
	c.Section(encode.Lit("defaults"), tcpDefaults)
	c.Line(encode.Lit("mode"), encode.Lit("tcp"))
	c.Line(encode.Lit("option"), encode.Lit("redispatch"))
	c.Line(encode.Lit("retries"), encode.Num(3))
	writeTimeouts(c, t, false)
}
