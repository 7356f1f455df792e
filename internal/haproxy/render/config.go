package render

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// Config renders haproxy.conf for lb. The result depends only on lb's spec
// and opts, byte for byte.
func Config(lb *model.LoadBalancer, opts Options) ([]byte, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	v, err := newView(lb, opts)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(uuidOf(lb)), err)
	}
	return renderView(v, opts, false)
}

func uuidOf(lb *model.LoadBalancer) string {
	if lb == nil {
		return "<nil>"
	}
	return lb.UUID
}

// renderView writes the file. With skeleton set, every server line is a
// placeholder: two skeletons are equal exactly when two configs differ in
// members only, which is what Plan needs.
func renderView(v *view, opts Options, skeleton bool) ([]byte, error) {
	var c encode.Config
	c.Comment(encode.Lit("pier"), encode.Lit("load"), encode.Lit("balancer"), encode.ID("", v.uuid))
	c.Comment(encode.Lit("generated;"), encode.Lit("do"), encode.Lit("not"), encode.Lit("edit"))
	writeGlobal(&c, opts)
	writeDefaults(&c, opts.Timeouts)
	for i := range v.listeners {
		writeFrontend(&c, v, &v.listeners[i], opts)
	}
	for i := range v.pools {
		writeBackend(&c, &v.pools[i], skeleton)
	}
	if v.need404 {
		c.Blank()
		c.Section(encode.Lit("backend"), notFound)
		c.Line(encode.Lit("http-request"), encode.Lit("return"), encode.Lit("status"), encode.Num(404),
			encode.Lit("content-type"), encode.Lit("text/plain"), encode.Lit("string"), encode.Lit("no matching route"))
	}
	out, err := c.Bytes()
	if err == nil {
		err = checkLimits(out, opts.MaxConfigBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	return out, nil
}

// notFound answers requests that match no policy on a listener without a
// default pool. Its name has no "be_" prefix, so no pool can take it.
var notFound = encode.Lit("pier_404")

func writeGlobal(c *encode.Config, o Options) {
	c.Blank()
	c.Section(encode.Lit("global"))
	c.Line(encode.Lit("maxconn"), encode.Num(o.MaxConn))
	// Old workers drain for at most this long after a reload.
	c.Line(encode.Lit("hard-stop-after"), encode.Millis(o.HardStopAfter))
	// expose-fd listeners lets a new worker take the listening sockets
	// over, so a reload refuses no connection (RELIABILITY.md, reload facts).
	c.Line(encode.Lit("stats"), encode.Lit("socket"), encode.FilePath(SocketPath(o.Dir)),
		encode.Lit("mode"), encode.Lit("600"), encode.Lit("level"), encode.Lit("admin"),
		encode.Lit("expose-fd"), encode.Lit("listeners"))
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

func writeDefaults(c *encode.Config, t Timeouts) {
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
	c.Line(encode.Lit("retry-on"), encode.Lit("conn-failure"), encode.Lit("empty-response"))
	// Measured: with it, keep-alive clients see no error across reloads.
	c.Line(encode.Lit("option"), encode.Lit("idle-close-on-response"))
	c.Line(encode.Lit("option"), encode.Lit("forwardfor"))
	// Header names outside [A-Za-z0-9-] are dropped, as nginx does with
	// underscores: "X_Forwarded_For" must not reach a backend that maps
	// "_" to "-".
	c.Line(encode.Lit("option"), encode.Lit("http-restrict-req-hdr-names"), encode.Lit("delete"))
	timeout := func(name encode.Word, d encode.Word) { c.Line(encode.Lit("timeout"), name, d) }
	timeout(encode.Lit("connect"), encode.Millis(t.Connect))
	timeout(encode.Lit("client"), encode.Millis(t.Client))
	timeout(encode.Lit("server"), encode.Millis(t.Server))
	timeout(encode.Lit("http-request"), encode.Millis(t.HTTPRequest))
	timeout(encode.Lit("http-keep-alive"), encode.Millis(t.KeepAlive))
	timeout(encode.Lit("queue"), encode.Millis(t.Queue))
	timeout(encode.Lit("tunnel"), encode.Millis(t.Tunnel))
}

func writeBackend(c *encode.Config, p *poolView, skeleton bool) {
	c.Blank()
	c.Section(encode.Lit("backend"), backendName(p.id))
	c.Line(encode.Lit("balance"), p.balance)
	for i, s := range p.slots {
		if skeleton {
			s = placeholder
		}
		words := []encode.Word{encode.Lit("server"), serverName(i), encode.AddrPort(s.addr, s.port),
			encode.Lit("weight"), encode.Num(s.weight)}
		if !s.used {
			words = append(words, encode.Lit("disabled"))
		}
		if p.check {
			words = append(words, encode.Lit("check"), encode.Lit("inter"), encode.Lit("2s"),
				encode.Lit("fall"), encode.Num(3), encode.Lit("rise"), encode.Num(2))
		}
		c.Line(words...)
	}
}
