package encode

import (
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

func itoa(n int) string { return strconv.Itoa(n) }

// Duration parses an annotation duration: digits and one unit among ms, s,
// m, h ("500ms", "30s"), nothing else (no sign, no spaces, no fraction),
// and checks min <= d <= max.
func Duration(s string, min, max time.Duration) (time.Duration, error) {
	const k = "duration"
	if err := asciiText(k, s, 16); err != nil {
		return 0, err
	}
	digits := strings.TrimRight(s, "mhs")
	unit := s[len(digits):]
	scale, ok := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	if !ok || digits == "" || len(digits) > 9 || strings.Trim(digits, "0123456789") != "" {
		return 0, refuse(k, "syntax", s, "must be digits followed by one of ms, s, m, h (e.g. 30s)")
	}
	n, _ := strconv.Atoi(digits) // at most 9 digits: cannot fail or overflow
	d := time.Duration(n) * scale
	if d < min || d > max {
		return 0, refuse(k, "range", s, "must be between "+min.String()+" and "+max.String())
	}
	return d, nil
}

// Int parses a decimal integer (optional '-', no '+', no spaces) and
// checks min <= n <= max.
func Int(s string, min, max int) (int, error) {
	const k = "integer"
	if err := asciiText(k, s, 20); err != nil {
		return 0, err
	}
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, refuse(k, "syntax", s, "must be a decimal integer")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		return 0, refuse(k, "range", s, "must be between "+itoa(min)+" and "+itoa(max))
	}
	return n, nil
}

// Enum accepts s only if it is exactly one of allowed (pier's constants).
func Enum(s string, allowed ...string) (Value, error) {
	if !slices.Contains(allowed, s) {
		return Value{}, refuse("value", "enum", s, "must be one of: "+strings.Join(allowed, ", "))
	}
	if err := asciiText("value", s, 256); err != nil {
		return Value{}, err
	}
	return Value{s}, nil
}

// Bool accepts exactly "true" or "false" (not strconv.ParseBool's "1",
// "T", "TRUE"...).
func Bool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, refuse("boolean", "enum", s, `must be "true" or "false"`)
}

// URL validates an absolute http or https URL without user info or
// fragment, and returns it re-serialised by net/url, so what is emitted is
// what Go understood, not the bytes the user sent.
//
// A URL may contain '%' and '$': in a log-format argument (redirect
// location, set-header) use LogFormatURL, which escapes '%'.
func URL(s string) (Value, error) {
	const k = "URL"
	if err := asciiText(k, s, MaxURLLen); err != nil {
		return Value{}, err
	}
	for i := 0; i < len(s); i++ {
		if !urlChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; only RFC 3986 characters are accepted, percent-encode the rest")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return Value{}, refuse(k, "syntax", s, "does not parse as a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return Value{}, refuse(k, "scheme", s, "scheme must be http or https")
	case u.User != nil:
		return Value{}, refuse(k, "userinfo", s, "must not contain user info")
	case u.Opaque != "" || u.Host == "":
		return Value{}, refuse(k, "host", s, "must be absolute, with a host")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return Value{}, refuse(k, "fragment", s, "must not contain a fragment")
	}
	if err := urlHost(u); err != nil {
		return Value{}, refuse(k, "host", s, err.(*Error).Msg)
	}
	out := u.String()
	if i := strings.IndexAny(out, `'"\ `); i >= 0 {
		return Value{}, refuse(k, "charset", s, "contains "+describeByte(out[i]))
	}
	if err := asciiText(k, out, MaxURLLen); err != nil {
		return Value{}, err
	}
	return Value{out}, nil
}

func urlHost(u *url.URL) error {
	if p := u.Port(); p != "" {
		if _, err := Int(p, 1, 65535); err != nil {
			return refuse("URL", "port", p, "port must be 1-65535")
		}
	}
	h := u.Hostname()
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return refuse("URL", "zone", h, "IPv6 zones are refused")
		}
		return nil
	}
	_, err := Host(h)
	return err
}

// urlChars is RFC 3986's unreserved, reserved and '%', minus the single
// quote. '#' stays so that a fragment gets its own message.
var urlChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&()*+,;=%")

// IP validates an address for a VIP, FIP or member: it must parse with
// net/netip, carry no zone and be neither unspecified nor multicast.
// IPv4-mapped IPv6 is unmapped. Emit the returned value, never s.
func IP(s string) (netip.Addr, error) {
	const k = "IP address"
	if err := asciiText(k, s, 64); err != nil {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, refuse(k, "syntax", s, "does not parse as an IP address")
	case a.Zone() != "":
		return netip.Addr{}, refuse(k, "zone", s, "IPv6 zones are refused")
	case a.IsUnspecified():
		return netip.Addr{}, refuse(k, "unspecified", s, "the unspecified address is refused")
	case a.IsMulticast():
		return netip.Addr{}, refuse(k, "multicast", s, "multicast addresses are refused")
	}
	return a.Unmap(), nil
}

// CIDR validates a prefix such as 10.0.0.0/8 and returns it masked
// (canonical), so "10.1.2.3/8" becomes 10.0.0.0/8.
func CIDR(s string) (netip.Prefix, error) {
	const k = "CIDR"
	if err := asciiText(k, s, 64); err != nil {
		return netip.Prefix{}, err
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, refuse(k, "syntax", s, "does not parse as an address prefix (e.g. 10.0.0.0/8)")
	}
	return p.Masked(), nil
}

// Port checks 1 <= n <= 65535.
func Port(n int) (int, error) {
	if n < 1 || n > 65535 {
		return 0, refuse("port", "range", itoa(n), "must be between 1 and 65535")
	}
	return n, nil
}
