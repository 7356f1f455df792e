package rawhttp

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rawCase is one request, byte for byte. build gets the case's marker
// path p ("/c/<name>") and the path s of a second request hidden in it
// ("/smuggled/<name>"); the backend is searched for both.
type rawCase struct {
	name  string
	build func(p, s string) string
	// slow: the request is never finished; the client waits for
	// HAProxy's http-request timeout.
	slow bool
	// view summarises what the backend got, for cases where that, not
	// only whether it got the request, is the point: the requests Go's
	// server parsed, and every byte the backend read.
	view func(reqs []request, raw []byte) string
}

// get is a complete GET for victim.example with extra header lines and
// Connection: close, so HAProxy ends the connection after one answer
// and anything after the request is never read as a new request.
func get(p string, headers ...string) string {
	return "GET " + p + " HTTP/1.1\r\nHost: " + victimHost + "\r\n" + lines(headers) + "Connection: close\r\n\r\n"
}

// post is a POST whose body is sent after the head as it is.
func post(p string, body string, headers ...string) string {
	return "POST " + p + " HTTP/1.1\r\nHost: " + victimHost + "\r\n" + lines(headers) + "Connection: close\r\n\r\n" + body
}

func lines(headers []string) string {
	var b strings.Builder
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	return b.String()
}

// smuggled is a complete second request, for the backend to never see.
func smuggled(s string) string { return "GET " + s + " HTTP/1.1\r\nHost: " + victimHost + "\r\n\r\n" }

func cl(body string) string { return "Content-Length: " + strconv.Itoa(len(body)) }

// header shows one header as the backend received it.
func header(name string) func([]request, []byte) string {
	return func(reqs []request, _ []byte) string {
		var out []string
		for _, r := range reqs {
			out = append(out, fmt.Sprintf("%s=%q", name, r.header.Values(name)))
		}
		return strings.Join(out, " ")
	}
}

// trailer shows one trailer field as the backend received it.
func trailer(name string) func([]request, []byte) string {
	return func(reqs []request, _ []byte) string {
		var out []string
		for _, r := range reqs {
			out = append(out, fmt.Sprintf("%s=%q", name, r.trailer.Values(name)))
		}
		return strings.Join(out, " ")
	}
}

// target shows the request target and Host as the backend received them.
func target(reqs []request, _ []byte) string {
	var out []string
	for _, r := range reqs {
		out = append(out, fmt.Sprintf("uri=%s host=%s", r.uri, r.host))
	}
	return strings.Join(out, " ")
}

func cases() []rawCase {
	return slices.Concat(controlCases(), framingCases(), headerCases(), lineCases(), pierCases())
}

// chunkedSmuggle ends a chunked body at once and hides a request after it.
func chunkedSmuggle(s string) string { return "0\r\n\r\n" + smuggled(s) }

func controlCases() []rawCase {
	return []rawCase{
		{name: "nul-in-header-value", build: func(p, s string) string { return get(p, "X-A: a\x00b") }},
		{name: "nul-in-header-name", build: func(p, s string) string { return get(p, "X-\x00A: b") }},
		{name: "nul-in-uri", build: func(p, s string) string { return get(p + "\x00x") }},
		{name: "ctl-in-header-value", build: func(p, s string) string { return get(p, "X-A: a\x01b") }, view: header("X-A")},
		{name: "vt-in-header-value", build: func(p, s string) string { return get(p, "X-A: a\x0bb") }, view: header("X-A")},
		{name: "tab-in-header-value", build: func(p, s string) string { return get(p, "X-A: a\tb") }, view: header("X-A")},
		{name: "del-in-header-value", build: func(p, s string) string { return get(p, "X-A: a\x7fb") }, view: header("X-A")},
		{name: "obs-text-in-header-value", build: func(p, s string) string { return get(p, "X-A: a\xffb") }, view: header("X-A")},
		{name: "nul-in-trailer", build: func(p, s string) string {
			return post(p, "3\r\nabc\r\n0\r\nX-T: a\x00b\r\n\r\n", "Transfer-Encoding: chunked", "Trailer: X-T")
		}, view: func(r []request, raw []byte) string {
			// Go's server drops the invalid trailer; the raw bytes show
			// whether HAProxy passed the NUL on.
			return trailer("X-T")(r, raw) + fmt.Sprintf(" raw-nul-trailer=%v", bytes.Contains(raw, []byte("x-t: a\x00b")))
		}},
		{name: "bare-cr-in-header-value", build: func(p, s string) string { return get(p, "X-A: a\rb") }},
		{name: "lf-only-line-endings", build: func(p, s string) string { return strings.ReplaceAll(get(p), "\r\n", "\n") }},
		{name: "obs-fold", build: func(p, s string) string { return get(p, "X-A: a", " b") }, view: header("X-A")},
	}
}

// framingCases try to make HAProxy and the backend disagree on where a
// request ends (request smuggling).
func framingCases() []rawCase {
	return []rawCase{
		{name: "duplicate-content-length-different", build: func(p, s string) string {
			return post(p, "abcd"+smuggled(s), "Content-Length: 3", "Content-Length: 4")
		}},
		{name: "duplicate-content-length-same", build: func(p, s string) string {
			return post(p, "abcd", "Content-Length: 4", "Content-Length: 4")
		}, view: body},
		{name: "empty-content-length", build: func(p, s string) string { return post(p, smuggled(s), "Content-Length: ") }},
		{name: "content-length-and-transfer-encoding", build: func(p, s string) string {
			b := chunkedSmuggle(s)
			return post(p, b, cl(b), "Transfer-Encoding: chunked")
		}, view: body},
		{name: "content-length-and-transfer-encoding-keep-alive", build: func(p, s string) string {
			b := chunkedSmuggle(s)
			return "POST " + p + " HTTP/1.1\r\nHost: " + victimHost + "\r\n" + cl(b) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + b
		}},
		{name: "transfer-encoding-in-http-1.0", build: func(p, s string) string {
			b := chunkedSmuggle(s)
			return strings.Replace(post(p, b, cl(b), "Transfer-Encoding: chunked"), "HTTP/1.1", "HTTP/1.0", 1)
		}, view: body},
		{name: "invalid-chunk-size", build: func(p, s string) string {
			return post(p, "zz\r\nabc\r\n"+chunkedSmuggle(s), "Transfer-Encoding: chunked")
		}},
		{name: "transfer-encoding-chunked-identity", build: func(p, s string) string {
			return post(p, "3\r\nabc\r\n"+chunkedSmuggle(s), "Transfer-Encoding: chunked, identity")
		}},
		{name: "transfer-encoding-space-before-colon", build: func(p, s string) string {
			b := chunkedSmuggle(s)
			return post(p, b, cl(b), "Transfer-Encoding : chunked")
		}},
		{name: "smuggled-request-in-body", build: func(p, s string) string {
			return post(p, smuggled(s), cl(smuggled(s)))
		}, view: func(r []request, _ []byte) string {
			var out []string
			for _, q := range r {
				out = append(out, strconv.Itoa(len(q.body))+" body bytes")
			}
			return strings.Join(out, " ")
		}},
	}
}

func headerCases() []rawCase {
	manyHeaders := make([]string, 101)
	for i := range manyHeaders {
		manyHeaders[i] = "X-H" + strconv.Itoa(i) + ": v"
	}
	return []rawCase{
		{name: "header-without-colon", build: func(p, s string) string { return get(p, "X-A b") }},
		{name: "space-before-colon", build: func(p, s string) string { return get(p, "X-A : b") }},
		{name: "oversized-header", build: func(p, s string) string { return get(p, "X-Big: "+strings.Repeat("a", 17000)) }},
		{name: "too-many-headers", build: func(p, s string) string { return get(p, manyHeaders...) }},
		{name: "duplicate-host", build: func(p, s string) string {
			return "GET " + p + " HTTP/1.1\r\nHost: " + victimHost + "\r\nHost: other.example\r\nConnection: close\r\n\r\n"
		}},
	}
}

// lineCases cover the request line, and the slow client that never
// finishes its head.
func lineCases() []rawCase {
	return []rawCase{
		{name: "invalid-method-characters", build: func(p, s string) string { return "G(T" + get(p)[3:] }},
		{name: "request-line-extra-spaces", build: func(p, s string) string {
			return strings.Replace(strings.Replace(get(p), " ", "  ", 1), " HTTP/1.1", "  HTTP/1.1", 1)
		}, view: target},
		{name: "http-1.0-without-host", build: func(p, s string) string { return "GET " + p + " HTTP/1.0\r\n\r\n" }},
		{name: "http-1.1-without-host", build: func(p, s string) string {
			return "GET " + p + " HTTP/1.1\r\nConnection: close\r\n\r\n"
		}},
		{name: "http-0.9", build: func(p, s string) string { return "GET " + p + "\r\n" }},
		{name: "absolute-form-same-host", build: func(p, s string) string {
			return strings.Replace(get(p), p, "http://"+victimHost+p, 1)
		}, view: target},
		{name: "absolute-form-authority-is-victim", build: func(p, s string) string {
			return strings.Replace(strings.Replace(get(p), p, "http://"+victimHost+p, 1), "Host: "+victimHost, "Host: other.example", 1)
		}, view: target},
		{name: "absolute-form-host-header-is-victim", build: func(p, s string) string {
			return strings.Replace(get(p), p, "http://other.example"+p, 1)
		}, view: target},
		{name: "fragment-in-uri", build: func(p, s string) string { return get(p + "#frag") }, view: target},
		{name: "slow-client", slow: true, build: func(p, s string) string {
			return "GET " + p + " HTTP/1.1\r\nHost: " + victimHost + "\r\nX-A: b\r\n"
		}},
	}
}

// pierCases check pier's own routing and hardening lines (config.go,
// frontend.go) against raw requests.
func pierCases() []rawCase {
	return []rawCase{
		{name: "pier-underscore-header-dropped", build: func(p, s string) string {
			return get(p, "X_Forwarded_Proto: https")
		}, view: func(r []request, raw []byte) string {
			return header("X_Forwarded_Proto")(r, raw) + " " + header("X-Forwarded-Proto")(r, raw)
		}},
		{name: "pier-forwarded-proto-overwritten", build: func(p, s string) string {
			return get(p, "X-Forwarded-Proto: https")
		}, view: header("X-Forwarded-Proto")},
		{name: "pier-host-case-and-port", build: func(p, s string) string {
			return strings.Replace(get(p), "Host: "+victimHost, "Host: VICTIM.Example:80", 1)
		}},
		{name: "pier-host-trailing-dot", build: func(p, s string) string {
			return strings.Replace(get(p), "Host: "+victimHost, "Host: "+victimHost+".", 1)
		}},
		{name: "pier-reject-policy", build: func(p, s string) string { return get("/admin" + p) }},
		{name: "pier-reject-double-slash", build: func(p, s string) string { return get("//admin" + p) }, view: target},
		{name: "pier-reject-dot-segment", build: func(p, s string) string { return get("/x/../admin" + p) }, view: target},
		{name: "pier-reject-percent-encoded", build: func(p, s string) string { return get("/%61dmin" + p) }, view: target},
		{name: "pier-reject-path-parameter", build: func(p, s string) string { return get("/admin;x" + p) }, view: target},
		{name: "pier-reject-dot-dot-parameter", build: func(p, s string) string { return get("/x/..;/admin" + p) }, view: target},
		{name: "pier-reject-backslash", build: func(p, s string) string { return get(`/x\..\admin` + p) }, view: target},
		{name: "pier-reject-double-encoded", build: func(p, s string) string { return get("/%2561dmin" + p) }, view: target},
		{name: "pier-reject-encoded-semicolon", build: func(p, s string) string { return get("/admin%3Bx" + p) }, view: target},
		{name: "pier-reject-encoded-backslash", build: func(p, s string) string { return get("/x%5c..%5cadmin" + p) }, view: target},
	}
}

func body(reqs []request, _ []byte) string {
	var out []string
	for _, r := range reqs {
		out = append(out, fmt.Sprintf("%q", r.body))
	}
	return strings.Join(out, " ")
}

// waitFor is how long the client waits for answers: past the slow
// client's http-request timeout, else a little past any answer HAProxy
// gives at once.
func (c rawCase) waitFor() time.Duration {
	if c.slow {
		return requestTimeout + 4*time.Second
	}
	return 2 * time.Second
}
