package render

import (
	"errors"
	"fmt"
	"net/netip"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
)

// The landing process serves a new load balancer within milliseconds,
// before its shard loads it (haproxydriver's landing.go). It is one
// HAProxy per node with a fixed configuration: one frontend bound on the
// wildcard address of the HTTP port, K spare backends with parked
// server slots, and empty maps. A load balancer lands by runtime
// commands only (PlanLanding): its members go to spare backends, its
// routes into the shared maps under keys prefixed with its landing id,
// and its VIP and FIP into vips.map last, so its addresses answer only
// once the rest is in place. Its shard binds the addresses specifically
// when it reloads; Linux prefers a listener bound to the address over a
// wildcard one (TestLandingListenerPreference), so from then on the
// shard takes every new connection, and the landing's entries are
// removed.
//
// The frontend applies the rules of a mapped HTTP listener
// (writeFrontend, writeRoutes) with the same lookups in the same order;
// what differs per load balancer comes from a map keyed by its landing
// id: whether it needs a Host header or guards paths (lbs.map), its
// default backend (default.map). Every response carries Connection:
// close, so a client comes back through the shard once it serves.
// Only what the landing reproduces exactly lands (Landable); anything
// else waits for its shard's reload as before.

// LandingOptions size the landing process.
type LandingOptions struct {
	// Port is the HTTP port the landing takes connections on: the port
	// of the load balancers' HTTP listener (pier's --http-port).
	Port int
	// Backends is the number of spare backends (at least 1): a landed
	// load balancer takes one per pool.
	Backends int
	// Slots is the number of server slots of each spare backend
	// (Options.MinSlots): a pool with more does not land.
	Slots int
	// BackendMaxConn is Options.BackendMaxConn.
	BackendMaxConn int
	// TrustedProxies is Options.TrustedProxies: a landed load balancer
	// sets forwarding headers as its shard will.
	TrustedProxies []netip.Prefix
}

func (o LandingOptions) check() error {
	if _, err := encode.Port(o.Port); err != nil {
		return fmt.Errorf("landing: %w", err)
	}
	if err := checkTrusted(o.TrustedProxies); err != nil {
		return fmt.Errorf("landing: %w", err)
	}
	if o.Backends < 1 || o.Backends > 4096 {
		return errors.New("landing: Backends must be between 1 and 4096")
	}
	if o.Slots < 1 || o.Slots > maxSlots {
		return errors.New("landing: Slots must be between 1 and 4096")
	}
	return nil
}

// The landing's maps, by name (layout.Process.LandingMap).
const (
	landingVIPs     = "vips"    // VIP or FIP -> landing id
	landingLBs      = "lbs"     // landing id -> "x" + flags (landingFlags)
	landingDefaults = "default" // landing id -> spare backend
)

// landingRouteMap names the route map of a class and kind (0 exact, 1
// prefix), as mapName does for a load balancer's own.
func landingRouteMap(class hostClass, kind int) string { return mapName(class, kind) }

// landingClasses are the classes a landed load balancer may use.
var landingClasses = []hostClass{classHost, classWildcard, classAny}

// LandingMapNames lists every map of the landing process; the agent
// creates them empty before starting it.
func LandingMapNames() []string {
	out := []string{landingVIPs, landingLBs, landingDefaults}
	for _, c := range landingClasses {
		out = append(out, landingRouteMap(c, kindExact), landingRouteMap(c, kindPrefix))
	}
	return out
}

// landingBackend names spare backend i.
func landingBackend(i int) encode.Word {
	return encode.Concat(encode.Lit("pier_landing_be_"), encode.Num(i))
}

var landing404 = encode.Lit("pier_landing_404")

// LandingConfig renders the landing process's configuration for folder
// p (it loads global.conf and p's process.conf first, as a shard does).
func LandingConfig(p layout.Process, o LandingOptions) ([]byte, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	file := func(name string) encode.Word { return encode.FilePath(p.LandingMap(name)) }
	lookup := func(sample encode.Word, name string) encode.Word {
		return encode.Concat(sample, encode.Lit(",map_str("), file(name), encode.Lit(")"))
	}
	var c encode.Config
	c.Comment(encode.Lit("pier"), encode.Lit("landing"), encode.Lit("process;"), encode.Lit("generated;"),
		encode.Lit("do"), encode.Lit("not"), encode.Lit("edit"))
	c.Blank()
	c.Section(encode.Lit("frontend"), encode.Lit("pier_landing"))
	// The wildcard address: a shard's bind on the VIP itself wins
	// (TestLandingListenerPreference); SO_REUSEPORT, HAProxy's default,
	// lets both bind the port.
	c.Line(encode.Lit("bind"), encode.Concat(encode.Lit("0.0.0.0:"), encode.Num(o.Port)), foreignBind)
	vip := encode.Concat(encode.Lit("dst,map_ip("), file(landingVIPs), encode.Lit(")"))
	// An address no landed load balancer has is none of the landing's
	// business: closed before a byte is read.
	c.Line(encode.Lit("tcp-request"), encode.Lit("connection"), encode.Lit("reject"), encode.Lit("unless"),
		openBrace, vip, encode.Lit("-m"), encode.Lit("found"), closeBrace)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_lid)"), vip)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_lflags)"), lookup(encode.Lit("var(txn.pier_lid)"), landingLBs))
	// writeFrontend's rules, each as the load balancer's own listener
	// has it (its flags say which apply).
	c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), ifWord,
		openBrace, encode.Lit("req.hdrs"), encode.Lit("-m"), encode.Lit("reg"),
		encode.Lit(`[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]`), closeBrace)
	writeForwarding(&c, encode.Lit("http"), o.Port, o.TrustedProxies)
	landingRefuseAmbiguous(&c)
	landingHostVars(&c)
	landingRoutes(&c, p)
	c.Line(encode.Lit("use_backend"), encode.Lit("%[var(txn.pier_be)]"), ifWord, routedACL)
	def := lookup(encode.Lit("var(txn.pier_lid)"), landingDefaults)
	c.Line(encode.Lit("use_backend"), encode.Concat(encode.Lit("%["), def, encode.Lit("]")), ifWord,
		openBrace, def, encode.Lit("-m"), encode.Lit("found"), closeBrace)
	c.Line(encode.Lit("default_backend"), landing404)
	c.Line(encode.Lit("http-after-response"), encode.Lit("set-header"), encode.Lit("Server"), encode.Lit("pier"),
		encode.Lit("unless"), openBrace, encode.Lit("res.hdr_cnt(server)"), encode.Lit("gt"), encode.Num(0), closeBrace)
	// Always: the next connection should reach the shard once it binds
	// the address.
	c.Line(encode.Lit("http-after-response"), encode.Lit("set-header"), encode.Lit("Connection"), encode.Lit("close"))
	spare := poolView{balance: encode.Lit("roundrobin"), slots: parked(o.Slots)}
	for i := range o.Backends {
		writeBackendNamed(&c, landingBackend(i), &spare, o.BackendMaxConn)
	}
	c.Blank()
	c.Section(encode.Lit("backend"), landing404)
	c.Line(encode.Lit("http-request"), encode.Lit("return"), encode.Lit("status"), encode.Num(404),
		encode.Lit("content-type"), encode.Lit("text/plain"), encode.Lit("string"), encode.Lit("no matching route"))
	out, err := c.Bytes()
	if err != nil {
		return nil, fmt.Errorf("render landing: %w", err)
	}
	return out, nil
}

// Flags of a landed load balancer in lbs.map: its listener reads the
// Host header (refuseAmbiguous's first rule), has policies (its second),
// has rules scoped to a path (its third).
const (
	flagHost   = "h"
	flagPaths  = "p"
	flagScoped = "s"
)

func landingRefuseAmbiguous(c *encode.Config) {
	flag := func(f encode.Word) []encode.Word {
		return []encode.Word{openBrace, encode.Lit("var(txn.pier_lflags)"), encode.Lit("-m"), encode.Lit("sub"), f, closeBrace}
	}
	noHost := encode.Lit("!{")
	words := []encode.Word{httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), ifWord}
	words = append(words, flag(encode.Lit(flagHost))...)
	words = append(words, noHost, encode.Lit("req.hdr(host)"), encode.Lit("-m"), encode.Lit("found"), closeBrace,
		encode.Lit("!{"), encode.Lit("req.ver"), encode.Lit("1.0"), closeBrace, encode.Lit("||"))
	words = append(words, flag(encode.Lit(flagHost))...)
	words = append(words, noHost, encode.Lit("req.hdr(host)"), encode.Lit("-m"), encode.Lit("found"), closeBrace,
		encode.Lit("!{"), encode.Lit("url_beg"), encode.Lit("/"), closeBrace)
	c.Line(words...)
	words = []encode.Word{httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), ifWord}
	words = append(words, flag(encode.Lit(flagPaths))...)
	words = append(words, openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("//"), encode.Lit("/./"), encode.Lit("/../"), closeBrace, encode.Lit("||"))
	words = append(words, flag(encode.Lit(flagPaths))...)
	words = append(words, openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("end"), encode.Lit("/."), encode.Lit("/.."), closeBrace, encode.Lit("||"))
	words = append(words, flag(encode.Lit(flagPaths))...)
	words = append(words, openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("%"), closeBrace,
		openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("reg"), encode.Lit("-i"),
		encode.Lit("%(?:2[def]|3[0-9]|[46][1-9a-f]|[57][0-9a]|5f|7e)"), closeBrace)
	c.Line(words...)
	words = []encode.Word{httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(400), ifWord}
	words = append(words, flag(encode.Lit(flagScoped))...)
	words = append(words, openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit(";"), encode.Lit(`\`), closeBrace, encode.Lit("||"))
	words = append(words, flag(encode.Lit(flagScoped))...)
	words = append(words, openBrace, encode.Lit("path"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("-i"), encode.Lit("%25"), encode.Lit("%3b"), encode.Lit("%5c"), closeBrace)
	c.Line(words...)
}

// landingHostVars computes hostVars's variables for every request (a
// load balancer without host rules has no host entries to match), then
// the same keys with the landing id in front.
func landingHostVars(c *encode.Config) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_host)"), encode.Lit("req.hdr(host),field(1,:),lower"),
		ifWord, encode.Lit("!{"), encode.Lit("req.hdr(host)"), encode.Lit("-m"), encode.Lit("sub"), encode.Lit("/"), closeBrace)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_host)"), encode.Lit("var(txn.pier_host),regsub([.]$,)"),
		ifWord, openBrace, encode.Lit("var(txn.pier_host)"), encode.Lit("-m"), encode.Lit("end"), encode.Lit("."), closeBrace)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_hwild)"), encode.Lit("var(txn.pier_host),regsub(^[^.]+[.],*.)"))
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_lpre)"), encode.Lit("var(txn.pier_lid),concat(:)"))
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_lhost)"), encode.Lit("var(txn.pier_lpre),concat(,txn.pier_host)"),
		ifWord, openBrace, encode.Lit("var(txn.pier_host)"), encode.Lit("-m"), encode.Lit("found"), closeBrace)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_lwild)"), encode.Lit("var(txn.pier_lpre),concat(,txn.pier_hwild)"),
		ifWord, openBrace, encode.Lit("var(txn.pier_hwild)"), encode.Lit("-m"), encode.Lit("found"), closeBrace)
}

// landingRoutes are writeRoutes's lookups, class by class: Exact, the
// longest Prefix, the catch-all; each only while nothing matched.
func landingRoutes(c *encode.Config, p layout.Process) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_path)"), encode.Lit("path,concat(/)"))
	c.Line(encode.Lit("acl"), routedACL, encode.Lit("var(txn.pier_be)"), encode.Lit("-m"), encode.Lit("found"))
	first := true
	lookup := func(expr encode.Word) {
		words := []encode.Word{httpRequest, routeVar, expr}
		if !first {
			words = append(words, ifWord, unrouted)
		}
		first = false
		c.Line(words...)
	}
	prefixes := map[hostClass]encode.Word{classHost: encode.Lit("var(txn.pier_lhost)"),
		classWildcard: encode.Lit("var(txn.pier_lwild)"), classAny: encode.Lit("var(txn.pier_lpre)")}
	for _, class := range landingClasses {
		file := func(kind int) encode.Word { return encode.FilePath(p.LandingMap(landingRouteMap(class, kind))) }
		key := encode.Concat(prefixes[class], encode.Lit(",concat(,txn.pier_path)"))
		lookup(encode.Concat(key, encode.Lit(",map_str("), file(kindExact), encode.Lit(")")))
		lookup(encode.Concat(key, encode.Lit(",map_beg("), file(kindPrefix), encode.Lit(")")))
		lookup(encode.Concat(prefixes[class], encode.Lit(",map_str("), file(kindExact), encode.Lit(")")))
	}
	c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(403),
		ifWord, openBrace, encode.Lit("var(txn.pier_be)"), encode.Lit("-m"), encode.Lit("str"), rejectValue, closeBrace)
	for _, status := range []int{404, 500, 501, 502, 503, 504} {
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(status),
			ifWord, openBrace, encode.Lit("var(txn.pier_be)"), encode.Lit("-m"), encode.Lit("str"), statusValue(status), closeBrace)
	}
}
