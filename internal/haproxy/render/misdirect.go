package render

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"pier.dev/pier/internal/encode"
)

// Misdirected requests (model.Listener.ListenerHosts): on a TLS port that
// several Gateway listeners share, the SNI chose a listener (and its
// certificate); a request whose Host belongs to another listener answers
// 421, so that an HTTP/2 connection reused for another name (RFC 9113
// 9.1.1) is not served by a listener it did not negotiate with.
//
// Each side's listener is computed once per request, as its position in
// the most-specific-first order of the hostnames: exact names, then
// wildcards by longer suffix, then the listener without hostname; -1
// when none matches. The rules grow with the listeners of the port (a
// Gateway has at most 64), not with routes.

// misdirectHost is one listener hostname of the port, validated.
type misdirectHost struct {
	kind  int // misdirectExact, misdirectSuffix or misdirectAny: most specific first
	value encode.Value
	raw   string
}

const (
	misdirectExact = iota
	misdirectSuffix
	misdirectAny
)

// misdirectHosts validates and orders a listener's ListenerHosts.
func misdirectHosts(in []string) ([]misdirectHost, error) {
	if len(in) == 1 {
		return nil, errors.New("listener hosts: one alone has nothing to be told from")
	}
	var out []misdirectHost
	seen := map[string]bool{}
	for _, h := range in {
		if seen[h] {
			return nil, fmt.Errorf("listener host %s twice", encode.Printable(h))
		}
		seen[h] = true
		m := misdirectHost{raw: h}
		var err error
		switch {
		case h == "":
			m.kind = misdirectAny
		case strings.HasPrefix(h, "*."):
			m.kind = misdirectSuffix
			m.value, err = encode.HostSuffix(h)
		default:
			m.kind = misdirectExact
			m.value, err = encode.Host(h)
		}
		if err != nil {
			return nil, fmt.Errorf("listener host: %w", err)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b misdirectHost) int {
		if a.kind != b.kind {
			return cmp.Compare(a.kind, b.kind)
		}
		if len(a.raw) != len(b.raw) && a.kind == misdirectSuffix {
			return cmp.Compare(len(b.raw), len(a.raw))
		}
		return cmp.Compare(a.raw, b.raw)
	})
	return out, nil
}

// writeMisdirect renders the two listener lookups and the 421 rule. A
// request without SNI is not checked: it chose no listener.
func writeMisdirect(c *encode.Config, l *listenerView) {
	if len(l.misdirect) == 0 {
		return
	}
	sides := []struct {
		set, found, sample encode.Word
	}{
		{encode.Lit("set-var(txn.pier_lsni)"), encode.Lit("var(txn.pier_lsni)"), encode.Lit("ssl_fc_sni,lower")},
		{encode.Lit("set-var(txn.pier_lhost)"), encode.Lit("var(txn.pier_lhost)"), encode.Lit("var(txn.pier_host)")},
	}
	for _, side := range sides {
		unset := []encode.Word{encode.Lit("!{"), side.found, encode.Lit("-m"), encode.Lit("found"), closeBrace}
		anyHost := false
		for i, h := range l.misdirect {
			index := encode.Concat(encode.Lit("int("), encode.Num(i), encode.Lit(")"))
			words := append([]encode.Word{httpRequest, side.set, index, ifWord}, unset...)
			switch h.kind {
			case misdirectExact:
				words = append(words, openBrace, side.sample, encode.Lit("-m"), encode.Lit("str"), h.value.Word(), closeBrace)
			case misdirectSuffix:
				words = append(words, openBrace, side.sample, encode.Lit("-m"), encode.Lit("end"), h.value.Word(), closeBrace)
			case misdirectAny:
				anyHost = true
			}
			c.Line(words...)
		}
		if !anyHost {
			c.Line(append([]encode.Word{httpRequest, side.set, encode.Lit("int(-1)"), ifWord}, unset...)...)
		}
	}
	c.Line(httpRequest, encode.Lit("return"), encode.Lit("status"), encode.Num(421),
		encode.Lit("content-type"), encode.Lit("text/plain"), encode.Lit("string"), encode.Lit("misdirected request"),
		ifWord, openBrace, encode.Lit("ssl_fc_sni"), encode.Lit("-m"), encode.Lit("found"), closeBrace,
		encode.Lit("!{"), encode.Lit("var(txn.pier_lsni),sub(txn.pier_lhost)"), encode.Lit("eq"), encode.Num(0), closeBrace)
}
