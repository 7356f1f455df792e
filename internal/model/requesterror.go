package model

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// RequestError is one kind of error response a load balancer gave on a
// node: the 5xx answers of one status to the requests of one route,
// from one member (or from HAProxy itself, when no member answered),
// that ended the same way, counted together. The request's method,
// host, path and id are the newest one's. A kind is kept while it is
// among a node's MaxRecentErrors most recently seen, so First is when
// it was first seen since then, not necessarily since it began.
type RequestError struct {
	// First and Last are when HAProxy accepted the first and the newest
	// request of this kind (millisecond resolution, UTC); Count is how
	// many there were from First to Last.
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	Count  uint64    `json:"count"`
	Status int       `json:"status"`
	Method string    `json:"method,omitempty"`
	// Host is the Host header as the client sent it (its port
	// included), Path the path without its query string (which often
	// carries tokens).
	Host string `json:"host,omitempty"`
	Path string `json:"path,omitempty"`
	// Namespace, Route (the Ingress or the HTTPRoute; several names
	// joined by "," when a group's Ingresses share the Service port, as
	// the access log's ingress), RouteKind, Service and ServicePort are
	// the route that chose the request's pool; Route is empty for an
	// answer of HAProxy's that no route chose in a group.
	Namespace   string `json:"namespace,omitempty"`
	Route       string `json:"route,omitempty"`
	RouteKind   string `json:"routeKind,omitempty"`
	Service     string `json:"service,omitempty"`
	ServicePort string `json:"servicePort,omitempty"`
	// Member (address:port) and Pod answered; both empty when no member
	// did (none up, none reachable, or HAProxy answered itself).
	Member string `json:"member,omitempty"`
	Pod    string `json:"pod,omitempty"`
	// TerminationState is HAProxy's four letters (the access log's
	// termination_state): SH-- a member closed or timed out before its
	// headers, SC-- none could be connected to.
	TerminationState string `json:"terminationState,omitempty"`
	// RequestID is the X-Request-ID the backend got, to find the
	// request in its log and in the access log.
	RequestID string `json:"requestID,omitempty"`
}

// Of says whether e is an error of route kind namespace/name: its
// namespace and kind, and its name or one of the names joined when a
// group's Ingresses share the pool.
func (e RequestError) Of(kind, namespace, name string) bool {
	if name == "" || e.Namespace != namespace || e.RouteKind != kind {
		return false
	}
	for n := range strings.SplitSeq(e.Route, ",") {
		if n == name {
			return true
		}
	}
	return false
}

// MaxRecentErrors bounds NodeStatus.RecentErrors: the kinds of error an
// operator reads at a glance, and a status object that stays small
// (under 25 KiB of errors with every field at its bound, a few KiB in
// practice).
const MaxRecentErrors = 10

// The bounds of RequestError's strings, in bytes. The CRD's schema
// holds the same numbers as maxLength: a longer value would make the
// API server refuse the whole report.
const (
	MaxErrorMethod = 16
	MaxErrorHost   = 255 // HAProxy captures 255 bytes of the Host
	MaxErrorPath   = 256
	MaxErrorName   = 253 // a namespace, Service or pod name
	// MaxErrorRoute holds a few joined Ingress names.
	MaxErrorRoute     = 512
	MaxErrorKind      = 32
	MaxErrorPort      = 63
	MaxErrorMember    = 64  // [IPv6]:port
	MaxErrorTerm      = 4   // HAProxy's termination state
	MaxErrorRequestID = 128 // the longest X-Request-ID pier keeps
)

// Bounded returns e with every string made safe to store and to print:
// bytes that are not printable UTF-8 (controls, invalid UTF-8, and
// invisible or bidirectional format characters that would make a path
// display as another) are percent-encoded, as in a URL, and each string
// is cut to its bound, on a character, ending in "…" when cut. A value
// already bounded is unchanged, so the readers of a report (the web
// view, pier get) apply it again to what an agent wrote.
func (e RequestError) Bounded() RequestError {
	e.Method = Printable(e.Method, MaxErrorMethod)
	e.Host = Printable(e.Host, MaxErrorHost)
	e.Path = Printable(e.Path, MaxErrorPath)
	e.Namespace = Printable(e.Namespace, MaxErrorName)
	e.Route = Printable(e.Route, MaxErrorRoute)
	e.RouteKind = Printable(e.RouteKind, MaxErrorKind)
	e.Service = Printable(e.Service, MaxErrorName)
	e.ServicePort = Printable(e.ServicePort, MaxErrorPort)
	e.Member = Printable(e.Member, MaxErrorMember)
	e.Pod = Printable(e.Pod, MaxErrorName)
	e.TerminationState = Printable(e.TerminationState, MaxErrorTerm)
	e.RequestID = Printable(e.RequestID, MaxErrorRequestID)
	return e
}

// Printable is s with the bytes of every rune that is not printable
// percent-encoded (a '%' itself is kept: a path's own escapes stay as
// the client sent them), cut to at most max bytes on a character
// boundary, "…" marking a cut.
func Printable(s string, max int) string {
	if max <= 0 {
		return ""
	}
	if len(s) <= max && isPrintable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !printableRune(r) {
			for _, c := range []byte(s[i : i+n]) {
				b.WriteByte('%')
				b.WriteByte("0123456789ABCDEF"[c>>4])
				b.WriteByte("0123456789ABCDEF"[c&15])
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	out := b.String()
	if len(out) <= max {
		return out
	}
	const mark = "…"
	if max < len(mark) {
		return out[:cutAt(out, max)]
	}
	return out[:cutAt(out, max-len(mark))] + mark
}

// cutAt is the largest i <= n at which s can be cut between characters.
func cutAt(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

func isPrintable(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return false
			}
		}
		if !printableRune(r) {
			return false
		}
	}
	return true
}

// printableRune: a graphic character or a plain space. Not a control,
// nor a format character (zero-width, bidirectional overrides and
// isolates, the BOM: not graphic), nor another space (a tab, a line
// separator) that would break a line or a column of pier get.
func printableRune(r rune) bool {
	if r == ' ' {
		return true
	}
	return unicode.IsGraphic(r) && !unicode.IsSpace(r)
}
