package bgp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
)

// Password is a TCP-MD5 key (RFC 2385). Its String, GoString, text and
// log forms are "[redacted]", so a Config printed with %v or %+v, encoded
// to JSON or passed to slog shows none of it; only the speaker reads the
// value, to hand it to the kernel.
type Password string

const redacted = "[redacted]"

func (Password) String() string               { return redacted }
func (Password) GoString() string             { return redacted }
func (Password) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Password) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (p Password) validate() error {
	// The kernel's TCP_MD5SIG takes at most 80 bytes
	// (TCP_MD5SIG_MAXKEYLEN); a NUL would end the key early in some
	// routers' configuration.
	switch {
	case len(p) > 80:
		return fmt.Errorf("TCP-MD5 password of %d bytes: at most 80", len(p))
	case strings.ContainsRune(string(p), 0):
		return errors.New("TCP-MD5 password holds a NUL byte")
	}
	return nil
}

// Passwords is what a password file says: a password per peer address,
// and one for every peer it does not name (Default, "" for none).
type Passwords struct {
	ByPeer  map[netip.Addr]Password
	Default Password
}

// For returns the password of the peer at addr, "" for none.
func (p Passwords) For(addr netip.Addr) Password {
	if pw, ok := p.ByPeer[addr.Unmap()]; ok {
		return pw
	}
	return p.Default
}

// ReadPasswords reads a password file (`pier agent --bgp-password-file`,
// a mounted Secret's key): one peer a line, its address, blanks, then its
// password, the rest of the line without the blanks around it; "*" instead
// of an address gives the password of every peer not named. Blank lines
// and lines starting with # are skipped. An error names the line, never
// what it holds.
func ReadPasswords(r io.Reader) (Passwords, error) {
	out := Passwords{ByPeer: map[netip.Addr]Password{}}
	seenDefault := false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.IndexAny(line, " \t")
		if cut < 0 {
			return Passwords{}, fmt.Errorf("line %d: want a peer address (or *), blanks, then the password", n)
		}
		who, pw := line[:cut], strings.TrimSpace(line[cut:])
		if pw == "" {
			return Passwords{}, fmt.Errorf("line %d: want a peer address (or *), blanks, then the password", n)
		}
		if err := Password(pw).validate(); err != nil {
			return Passwords{}, fmt.Errorf("line %d: %w", n, err)
		}
		if who == "*" {
			if seenDefault {
				return Passwords{}, fmt.Errorf("line %d: a second * line", n)
			}
			out.Default, seenDefault = Password(pw), true
			continue
		}
		addr, err := netip.ParseAddr(who)
		if err != nil {
			// Not quoted back: a line that lost its address starts with
			// the password.
			return Passwords{}, fmt.Errorf("line %d: the first word is not a peer address (or *)", n)
		}
		addr = addr.Unmap()
		if _, dup := out.ByPeer[addr]; dup {
			return Passwords{}, fmt.Errorf("line %d: a second password for %s", n, addr)
		}
		out.ByPeer[addr] = Password(pw)
	}
	if err := sc.Err(); err != nil {
		return Passwords{}, err
	}
	return out, nil
}
