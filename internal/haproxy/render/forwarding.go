package render

import (
	"net/netip"

	"pier.dev/pier/internal/encode"
)

// Forwarding headers, as ingress-nginx sets them, with one trust rule.
//
// A client is trusted when its address is in Options.TrustedProxies (a
// load balancer or proxy in front of pier, ingress-nginx's
// use-forwarded-headers with proxy-real-ip-cidr). Every header a backend
// may build URLs or allow-lists from is otherwise pier's own:
//
//	header             untrusted client        trusted client
//	X-Forwarded-For    address (replaced)      theirs + ", " + address
//	X-Real-IP          address                 last X-Forwarded-For entry, else address
//	X-Forwarded-Host   Host (replaced)         theirs, else Host
//	X-Forwarded-Port   listener port           theirs, else listener port
//	X-Forwarded-Proto  http or https           theirs, else http or https
//	Forwarded          removed                 theirs
//	X-Original-URI     removed                 removed
//	X-Request-ID       theirs if one sane token, else a new UUID (both)
//
// X-Real-IP is never taken from a trusted proxy's X-Real-IP: load
// balancers that append to X-Forwarded-For (cloud L7 balancers do) pass
// a client's X-Real-IP through untouched, so that header would still be
// the client's choice. The last X-Forwarded-For entry is the one the
// trusted proxy wrote, as nginx's realip module reads it.
//
// The rules run before any route's own (upstream-vhost, header
// modifiers), so a route can still set these headers; X-Forwarded-Host
// is the Host the client sent, before upstream-vhost changes it.
var (
	trustedACL = encode.Lit("pier_trusted")
	srcSample  = encode.Lit("%[src]")
	hostFound  = []encode.Word{openBrace, encode.Lit("req.hdr(host)"), encode.Lit("-m"), encode.Lit("found"), closeBrace}
)

// requestIDToken is what a client's X-Request-ID must look like to be
// kept: one header, 1-128 characters of the sets request IDs use (hex,
// UUIDs, base64, "Root=1-..." trace ids). Anything else could carry
// text a log or a backend reads as markup or a second field.
var requestIDToken = encode.Lit(`^[A-Za-z0-9._:+=/-]{1,128}$`)

// writeForwarding writes the frontend's forwarding-header rules for a
// listener on port whose scheme is proto ("http" or "https").
func writeForwarding(c *encode.Config, proto encode.Word, port int, trusted []netip.Prefix) {
	if len(trusted) == 0 {
		writeUntrusted(c, proto, port)
	} else {
		writeTrusted(c, proto, port, trusted)
	}
	// One header that is a sane token is kept; none, several or an
	// odd one is replaced by a version 4 UUID.
	c.Line(httpRequest, encode.Lit("set-header"), encode.Lit("X-Request-ID"), encode.Lit("%[uuid()]"), encode.Lit("unless"),
		openBrace, encode.Lit("req.fhdr_cnt(x-request-id)"), encode.Lit("eq"), encode.Num(1), closeBrace,
		openBrace, encode.Lit("req.fhdr(x-request-id)"), encode.Lit("-m"), encode.Lit("reg"), requestIDToken, closeBrace)
}

// writeUntrusted: every client is the first hop. set-header removes
// every header of the name before adding pier's.
func writeUntrusted(c *encode.Config, proto encode.Word, port int) {
	set := func(name, value encode.Word, cond ...encode.Word) {
		c.Line(append([]encode.Word{httpRequest, encode.Lit("set-header"), name, value}, cond...)...)
	}
	c.Line(httpRequest, encode.Lit("del-header"), encode.Lit("Forwarded"))
	c.Line(httpRequest, encode.Lit("del-header"), encode.Lit("X-Original-URI"))
	set(encode.Lit("X-Real-IP"), srcSample)
	set(encode.Lit("X-Forwarded-For"), srcSample)
	// An HTTP/1.0 request may come without Host: then no X-Forwarded-Host
	// at all, rather than an empty one or the client's.
	set(encode.Lit("X-Forwarded-Host"), encode.Lit("%[req.hdr(host)]"), append([]encode.Word{ifWord}, hostFound...)...)
	c.Line(append([]encode.Word{httpRequest, encode.Lit("del-header"), encode.Lit("X-Forwarded-Host"), encode.Lit("unless")}, hostFound...)...)
	set(encode.Lit("X-Forwarded-Port"), encode.Num(port))
	set(encode.Lit("X-Forwarded-Proto"), proto)
}

// writeTrusted: an untrusted client's forwarding headers are removed
// first, so "keep theirs, else ours" below needs no second condition.
func writeTrusted(c *encode.Config, proto encode.Word, port int, trusted []netip.Prefix) {
	sourceACL(c, trustedACL, trusted)
	c.Line(httpRequest, encode.Lit("del-header"), encode.Lit("^(forwarded|x-forwarded-(host|port|proto))$"),
		encode.Lit("-m"), encode.Lit("reg"), encode.Lit("unless"), trustedACL)
	c.Line(httpRequest, encode.Lit("del-header"), encode.Lit("X-Original-URI"))
	// set-var leaves the variable as it was when the sample fails (an
	// entry that is not an address): the peer's address then.
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_rip)"), encode.Lit("src"))
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_rip)"), encode.Lit("req.hdr_ip(x-forwarded-for,-1)"), ifWord, trustedACL)
	c.Line(httpRequest, encode.Lit("set-header"), encode.Lit("X-Real-IP"), encode.Lit("%[var(txn.pier_rip)]"))
	// Appended on the same line when the proxy sent one; req.fhdr reads
	// only the last line, so several lines get ours as one more.
	oneXFF := []encode.Word{openBrace, encode.Lit("req.fhdr_cnt(x-forwarded-for)"), encode.Lit("eq"), encode.Num(1), closeBrace}
	c.Line(append([]encode.Word{httpRequest, encode.Lit("set-header"), encode.Lit("X-Forwarded-For"),
		encode.Lit("%[req.fhdr(x-forwarded-for)], %[src]"), ifWord, trustedACL}, oneXFF...)...)
	c.Line(httpRequest, encode.Lit("add-header"), encode.Lit("X-Forwarded-For"), srcSample, ifWord, trustedACL,
		encode.Lit("!{"), encode.Lit("req.fhdr_cnt(x-forwarded-for)"), encode.Lit("eq"), encode.Num(1), closeBrace)
	c.Line(httpRequest, encode.Lit("set-header"), encode.Lit("X-Forwarded-For"), srcSample, encode.Lit("unless"), trustedACL)
	keepOrSet := func(name, lower, value encode.Word, cond ...encode.Word) {
		words := append([]encode.Word{httpRequest, encode.Lit("set-header"), name, value, ifWord}, cond...)
		words = append(words, encode.Lit("!{"), encode.Concat(encode.Lit("req.fhdr("), lower, encode.Lit(")")),
			encode.Lit("-m"), encode.Lit("found"), closeBrace)
		c.Line(words...)
	}
	keepOrSet(encode.Lit("X-Forwarded-Host"), encode.Lit("x-forwarded-host"), encode.Lit("%[req.hdr(host)]"), hostFound...)
	keepOrSet(encode.Lit("X-Forwarded-Port"), encode.Lit("x-forwarded-port"), encode.Num(port))
	keepOrSet(encode.Lit("X-Forwarded-Proto"), encode.Lit("x-forwarded-proto"), proto)
}
