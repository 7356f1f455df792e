package nft

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// This file is the only place text of the ruleset is built (lint_test.go
// enforces it): a line is made of words, and a word is either a Go
// constant, an IPv4 address from net/netip, a number pier computed, or an
// identifier pier derived from a hash. No string from a user or from the
// store can become a word without passing one of these constructors, so
// nothing can add a statement, a comment or a second command to the
// transaction.

// keyword is unexported: an untyped string constant converts to it, a
// string variable outside this package cannot. lit("goto") compiles,
// lit(name) does not.
type keyword string

// word is one token of a rule.
type word struct{ s string }

func lit(k keyword) word { return word{string(k)} }

// identPattern is what chain, set and map names of ours look like.
var identPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// ident makes a word of a name pier built; anything else is an error.
func ident(s string) (word, error) {
	if !identPattern.MatchString(s) {
		return word{}, errors.New("nft: identifier does not match " + identPattern.String())
	}
	return word{s}, nil
}

// addr4 makes a word of an IPv4 address. netip formats it in dotted
// decimal, with nothing else in it.
func addr4(a netip.Addr) (word, error) {
	if !a.Is4() || a.IsUnspecified() {
		return word{}, errors.New("nft: not a usable IPv4 address")
	}
	return word{a.String()}, nil
}

// addr makes a word of an IPv4 or IPv6 address without a zone, as
// net/netip formats it.
func addr(a netip.Addr) (word, error) {
	if !a.IsValid() || a.IsUnspecified() || a.Zone() != "" {
		return word{}, errors.New("nft: not a usable address")
	}
	return word{a.Unmap().String()}, nil
}

// ifnamePattern is a Linux interface name (IFNAMSIZ: 15 characters) of
// characters that mean nothing to nft inside a quoted string.
var ifnamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)

// ifname makes a quoted string word of an interface name.
func ifname(s string) (word, error) {
	if !ifnamePattern.MatchString(s) {
		return word{}, errors.New("nft: interface name does not match " + ifnamePattern.String())
	}
	return word{`"` + s + `"`}, nil
}

// port makes a word of a port number, 1-65535.
func port(p uint16) (word, error) {
	if p == 0 {
		return word{}, errors.New("nft: port 0")
	}
	return word{strconv.Itoa(int(p))}, nil
}

func num(n int) word { return word{strconv.Itoa(n)} }

// proto is the nft keyword of a protocol.
func (p Proto) word() (word, error) {
	switch p {
	case TCP:
		return lit("tcp"), nil
	case UDP:
		return lit("udp"), nil
	}
	return word{}, errors.New("nft: unknown protocol")
}

// keyWord turns the text of an element key back into its word: the keys
// of render.go's elementSets are made of typed words only, so the text is
// one already.
func keyWord(k string) word { return word{k} }

// text accumulates lines of the transaction.
type text struct {
	b strings.Builder
}

// line writes one line: depth tabs, then the words separated by spaces.
func (t *text) line(depth int, words ...word) {
	t.b.WriteString(strings.Repeat("\t", depth))
	for i, w := range words {
		if i > 0 {
			t.b.WriteByte(' ')
		}
		t.b.WriteString(w.s)
	}
	t.b.WriteByte('\n')
}

// join makes one word of several separated by sep (a concatenation
// "a . b", a map element "0 : a . b"), each already a word.
func join(sep keyword, words ...word) word {
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = w.s
	}
	return word{strings.Join(parts, string(sep))}
}
