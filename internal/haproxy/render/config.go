package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// Result is one load balancer rendered once: what the agent writes, and
// what planning compares. Build it with Render only.
type Result struct {
	UUID string
	// Fragment is haproxy.conf: the load balancer's frontends and
	// backends, every section name scoped to its UUID.
	Fragment []byte
	// CrtList is the crt-list file; nil when no listener terminates TLS.
	CrtList []byte
	// CrtListPath is where CrtList goes: named by its digest, so that it
	// never overwrites the file an older configuration reads.
	CrtListPath string
	// Maps are the listeners' routing maps, to write beside the fragment
	// before it is checked, named by digest like the crt-list.
	Maps []MapFile
	// AuthLua is the Lua file of the auth-url and custom-http-errors
	// actions (those the profiles use), nil when no profile uses either;
	// AuthLuaPath is where it goes (named by digest), which the
	// fragment's global section loads.
	AuthLua     []byte
	AuthLuaPath string
	// Slots is the member-to-slot assignment the fragment declares; pass
	// it to the next Render.
	Slots Slots

	view     *view
	skeleton [sha256.Size]byte // the fragment without its server lines
	// routeSkeleton is skeleton with the exact and prefix maps named by
	// label, not digest (mapupdate.go).
	routeSkeleton [sha256.Size]byte
	// names are the names the running HAProxy knows maps and pools by
	// where they are not this result's own (RunsWith).
	names runningNames
}

// Render validates lb and renders its fragment and crt-list for the
// folder at, keeping each member in the slot prev gave it (nil: no
// history). The result depends only on lb's spec, at, prev and opts,
// byte for byte.
func Render(lb *model.LoadBalancer, at layout.LB, prev Slots, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	v, err := newView(lb, opts, prev)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(uuidOf(lb)), err)
	}
	if err := encode.FilePath(at.Dir).Err(); err != nil {
		return nil, fmt.Errorf("render %s: folder: %w", encode.Printable(uuidOf(lb)), err)
	}
	if lb.UUID != at.UUID {
		return nil, fmt.Errorf("render %s: folder of %s", encode.Printable(lb.UUID), encode.Printable(at.UUID))
	}
	if err := upstreamTLS(v, at); err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	if err := clientCAFiles(v, at); err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	r := &Result{UUID: v.uuid, Slots: slotsOf(v), view: v}
	if r.CrtList, err = crtList(v, at); err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	if r.CrtList != nil {
		sum := sha256.Sum256(r.CrtList)
		if r.CrtListPath, err = at.CrtList(hex.EncodeToString(sum[:])); err != nil {
			return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
		}
	}
	v.crtListPath = r.CrtListPath
	if err := decryptDefaults(v, at); err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	if r.Maps, err = routeMapFiles(v, at); err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	sniMaps, err := passthroughMaps(v, at)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	r.Maps = append(r.Maps, sniMaps...)
	authMaps, err := authMapFiles(v.sections, at)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	r.Maps = append(r.Maps, authMaps...)
	if r.AuthLua, err = authLuaFile(v.sections); err != nil {
		return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
	}
	if r.AuthLua != nil {
		sum := sha256.Sum256(r.AuthLua)
		if r.AuthLuaPath, err = at.AuthLua(hex.EncodeToString(sum[:])); err != nil {
			return nil, fmt.Errorf("render %s: %w", encode.Printable(v.uuid), err)
		}
	}
	v.authLuaPath = r.AuthLuaPath
	if r.Fragment, err = renderFragment(v, at, opts); err != nil {
		return nil, err
	}
	r.skeleton = skeletonOf(r.Fragment)
	r.routeSkeleton = routeSkeletonOf(r.Fragment, v)
	return r, nil
}

// Pools is the number of the load balancer's pools (each takes a spare
// backend when it lands, PlanLanding).
func (r *Result) Pools() int { return len(r.view.pools) }

// Config renders lb as one self-contained file for a process of its own
// in opts.Dir: global.conf, process.conf and the fragment, with no slot
// history. The agent does not use it; tests and benchmarks do.
func Config(lb *model.LoadBalancer, opts Options) ([]byte, error) {
	at := layout.LB{UUID: uuidOf(lb), Dir: opts.Dir}
	r, err := Render(lb, at, nil, opts)
	if err != nil {
		return nil, err
	}
	global, err := Global(opts)
	if err != nil {
		return nil, err
	}
	proc, err := ProcessConf(layout.Process{Dir: opts.Dir}, false)
	if err != nil {
		return nil, err
	}
	return bytes.Join([][]byte{global, proc, r.Fragment}, []byte("\n")), nil
}

// CrtList renders lb's crt-list for the folder opts.Dir (see Render).
func CrtList(lb *model.LoadBalancer, opts Options) ([]byte, error) {
	r, err := Render(lb, layout.LB{UUID: uuidOf(lb), Dir: opts.Dir}, nil, opts)
	if err != nil {
		return nil, err
	}
	return r.CrtList, nil
}

// Maps renders lb's routing maps for the folder opts.Dir (see Render);
// Config's file reads them there.
func Maps(lb *model.LoadBalancer, opts Options) ([]MapFile, error) {
	r, err := Render(lb, layout.LB{UUID: uuidOf(lb), Dir: opts.Dir}, nil, opts)
	if err != nil {
		return nil, err
	}
	return r.Maps, nil
}

func uuidOf(lb *model.LoadBalancer) string {
	if lb == nil {
		return "<nil>"
	}
	return lb.UUID
}

// renderFragment writes the load balancer's sections. They need the
// defaults of global.conf, which every process loads first.
func renderFragment(v *view, at layout.LB, opts Options) ([]byte, error) {
	var c encode.Config
	c.Comment(encode.Lit("pier"), encode.Lit("load"), encode.Lit("balancer"), encode.ID("", v.uuid))
	c.Comment(encode.Lit("generated;"), encode.Lit("do"), encode.Lit("not"), encode.Lit("edit"))
	if v.authLuaPath != "" {
		writeAuthHead(&c, encode.FilePath(v.authLuaPath))
	}
	for i := range v.listeners {
		l := &v.listeners[i]
		if len(l.passthrough) > 0 {
			writePassthrough(&c, v, l)
		}
		if l.tcp {
			writeTCPFrontend(&c, v, l)
		}
		if l.terminates() {
			writeFrontend(&c, v, l, at)
		}
	}
	for i := range v.pools {
		writeBackend(&c, v.uuid, &v.pools[i], v.backendMaxConn)
	}
	for i := range v.spares {
		writeBackend(&c, v.uuid, &v.spares[i], v.backendMaxConn)
	}
	writeAuthFrontends(&c, v.sections)
	writeErrorFrontends(&c, v.sections)
	writeUserlists(&c, v.sections)
	writeStickTables(&c, v.sections)
	if v.need404 {
		c.Blank()
		c.Section(encode.Lit("backend"), notFoundName(v.uuid))
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

// serverLine starts every server line of a fragment and nothing else:
// lines are built from encoded words, and only writeBackend writes
// "server" as a section line's first word.
var serverLine = []byte("    server ")

// skeletonOf hashes the fragment without its server lines: two
// skeletons are equal exactly when two fragments differ in slot contents
// only, which is what planning needs, without a second render.
func skeletonOf(fragment []byte) [sha256.Size]byte {
	var kept [][]byte
	for _, line := range bytes.SplitAfter(fragment, []byte("\n")) {
		if !bytes.HasPrefix(line, serverLine) {
			kept = append(kept, line)
		}
	}
	return sha256.Sum256(bytes.Join(kept, nil))
}

func writeBackend(c *encode.Config, uuid string, p *poolView, maxConn int) {
	writeBackendNamed(c, backendName(uuid, p.id), p, maxConn)
}

// writeDeadline bounds a request across its attempts: a backend's
// http-request rules run once per request, before the first attempt,
// and its http-response rules on the answer that ends the retries, so
// the time between them is what every attempt took together. HAProxy
// cannot cut an attempt short at the deadline (each has its timeout
// server); the answer that comes after it is replaced by the 504 the
// client would have had from a single attempt's timeout.
func writeDeadline(c *encode.Config, d time.Duration) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_t0)"), encode.Lit("date(0,ms)"))
	c.Line(encode.Lit("http-response"), encode.Lit("set-var(txn.pier_dt)"), encode.Lit("date(0,ms),sub(txn.pier_t0)"))
	c.Line(encode.Lit("http-response"), encode.Lit("return"), encode.Lit("status"), encode.Num(504), ifWord,
		openBrace, encode.Lit("var(txn.pier_dt)"), encode.Lit("-m"), encode.Lit("int"), encode.Lit("gt"),
		encode.Num(int(d/time.Millisecond)), closeBrace)
}

// writeBackendNamed is writeBackend under another name (the landing
// process's spare backends hold other load balancers' pools).
func writeBackendNamed(c *encode.Config, name encode.Word, p *poolView, maxConn int) {
	c.Blank()
	if p.tcp {
		c.Section(encode.Lit("backend"), name, encode.Lit("from"), tcpDefaults)
		c.Line(encode.Lit("mode"), encode.Lit("tcp"))
	} else {
		c.Section(encode.Lit("backend"), name)
	}
	c.Line(encode.Lit("balance"), p.balance)
	if p.connect > 0 {
		c.Line(encode.Lit("timeout"), encode.Lit("connect"), encode.Millis(p.connect))
	}
	if p.server > 0 {
		c.Line(encode.Lit("timeout"), encode.Lit("server"), encode.Millis(p.server))
	}
	if p.tries > 0 {
		c.Line(encode.Lit("retries"), encode.Num(p.tries-1))
	}
	if len(p.retryOn) > 0 {
		c.Line(append([]encode.Word{encode.Lit("retry-on")}, p.retryOn...)...)
	}
	if p.cookie != nil {
		writeCookie(c, p.cookie)
	}
	if maxConn > 0 {
		writeBackendBound(c, p.tcp, maxConn)
	}
	if p.fail > 0 && p.tcp {
		// A TCP pool's failing share is refused connections.
		c.Line(encode.Lit("tcp-request"), encode.Lit("content"), encode.Lit("reject"), ifWord,
			openBrace, encode.Concat(encode.Lit("rand("), encode.Num(p.failTotal), encode.Lit(")")),
			encode.Lit("-m"), encode.Lit("int"), encode.Lit("lt"), encode.Num(p.fail), closeBrace)
	} else if p.fail > 0 {
		// rand(n) is uniform in 0..n-1: fail of failTotal requests.
		c.Line(encode.Lit("http-request"), encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(500), ifWord,
			openBrace, encode.Concat(encode.Lit("rand("), encode.Num(p.failTotal), encode.Lit(")")),
			encode.Lit("-m"), encode.Lit("int"), encode.Lit("lt"), encode.Num(p.fail), closeBrace)
	}
	if p.deadline > 0 {
		writeDeadline(c, p.deadline)
	}
	// The pool's own header changes: a backend's http-request rules run
	// after the frontend's, so after the policy's changes.
	for _, h := range p.reqHeaders {
		words := []encode.Word{httpRequest, h.action, h.name}
		if h.value.Err() == nil {
			words = append(words, h.value)
		}
		c.Line(words...)
	}
	if p.rewrite != nil {
		c.Line(append([]encode.Word{httpRequest}, p.rewrite...)...)
	}
	for i, s := range p.slots {
		words := []encode.Word{encode.Lit("server"), serverName(i), encode.AddrPort(s.addr, s.port),
			encode.Lit("weight"), encode.Num(s.weight)}
		words = append(words, p.protocol...)
		if p.cookie != nil {
			// The cookie's value is the slot's name: a member keeps its
			// slot while it stays (assignSlots), so its clients stay
			// with it; a freed slot's clients go to its next member.
			words = append(words, encode.Lit("cookie"), serverName(i))
		}
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

// writeBackendBound refuses a request when its backend already holds
// maxConn others. be_conn counts the streams assigned to the backend,
// queued ones and the one being evaluated included, so "gt" lets exactly
// maxConn through. HTTP gets a 503 that says why; TCP is closed.
func writeBackendBound(c *encode.Config, tcp bool, maxConn int) {
	full := []encode.Word{ifWord, openBrace, encode.Lit("be_conn"), encode.Lit("gt"), encode.Num(maxConn), closeBrace}
	if tcp {
		c.Line(append([]encode.Word{encode.Lit("tcp-request"), encode.Lit("content"), encode.Lit("reject")}, full...)...)
		return
	}
	c.Line(append([]encode.Word{encode.Lit("http-request"), encode.Lit("return"), encode.Lit("status"), encode.Num(503),
		encode.Lit("content-type"), encode.Lit("text/plain"), encode.Lit("string"), encode.Lit("backend at its connection limit")}, full...)...)
}
