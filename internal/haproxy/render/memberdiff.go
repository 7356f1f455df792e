package render

import (
	"bytes"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// MembersOnly reports whether fragment next differs from prev only in
// what a member change sets through the runtime API on server lines: a
// slot's address and port, its weight, and whether it is disabled. Every
// other byte is the same, the lines' order, the slots' names and their
// other options included.
//
// The agent uses it to skip `haproxy -c` of next alone when prev passed
// one (update.go): the words that differ are typed (an address and port
// from net/netip, an integer, a keyword), so HAProxy cannot refuse next
// when it accepted prev. That check costs 40–60 ms of a CPU per endpoint
// change, several times the rest of the change's path. A server line
// holding a quoted word is never taken as members only, so that the
// comparison needs no tokenizer: it is simply checked.
func MembersOnly(prev, next []byte) bool {
	for len(prev) > 0 || len(next) > 0 {
		var a, b []byte
		a, prev, _ = bytes.Cut(prev, []byte("\n"))
		b, next, _ = bytes.Cut(next, []byte("\n"))
		if !bytes.Equal(a, b) && !sameServerSlot(string(a), string(b)) {
			return false
		}
	}
	return true
}

// sameServerSlot: a and b are server lines (config.go's writePool) of
// the same slot that differ at most in the address, the weight and the
// disabled keyword.
func sameServerSlot(a, b string) bool {
	fa, okA := serverFields(a)
	fb, okB := serverFields(b)
	if !okA || !okB || fa[1] != fb[1] || a[:len(a)-len(strings.TrimLeft(a, " "))] != b[:len(b)-len(strings.TrimLeft(b, " "))] {
		return false
	}
	return slices.Equal(withoutDisabled(fa[5:]), withoutDisabled(fb[5:]))
}

// serverFields splits "server <slot> <addr:port> weight <n> …" into its
// words, and says whether it is one: the address parses, the weight is
// an integer, no word is quoted.
func serverFields(line string) ([]string, bool) {
	if strings.ContainsAny(line, `'"\`) {
		return nil, false
	}
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "server" || f[3] != "weight" {
		return nil, false
	}
	if _, err := netip.ParseAddrPort(f[2]); err != nil {
		return nil, false
	}
	if _, err := strconv.Atoi(f[4]); err != nil {
		return nil, false
	}
	return f, true
}

// withoutDisabled drops the one "disabled" keyword a slot without a
// member carries.
func withoutDisabled(words []string) []string {
	if i := slices.Index(words, "disabled"); i >= 0 {
		return slices.Delete(slices.Clone(words), i, i+1)
	}
	return words
}
