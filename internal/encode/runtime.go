package encode

import (
	"errors"
	"net/netip"
	"strings"
)

// Command is one line for the HAProxy runtime API (the stats socket).
// The CLI splits words on spaces, commands on ';', and honours '\'
// escapes, with no quoting at all; so a Command is made only of pier's
// identifiers, constants, numbers and addresses, each in [A-Za-z0-9._:/-].
// User-derived Values are refused outright.
type Command struct{ line string }

// String returns the command without the trailing newline the socket
// protocol needs.
func (c Command) String() string { return c.line }

var cliChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/-")

// NewCommand builds a runtime command from non-user words.
func NewCommand(words ...Word) (Command, error) {
	if len(words) == 0 {
		return Command{}, errors.New("encode: empty command")
	}
	parts := make([]string, len(words))
	for i, w := range words {
		if err := w.Err(); err != nil {
			return Command{}, err
		}
		if w.kind == kindUser || w.kind == kindFile {
			return Command{}, errors.New("encode: user value or file path in a runtime command: " + Printable(w.s))
		}
		for j := 0; j < len(w.s); j++ {
			if !cliChars[w.s[j]] {
				return Command{}, errors.New("encode: runtime command word contains " + describeByte(w.s[j]) + ": " + Printable(w.s))
			}
		}
		parts[i] = w.s
	}
	return Command{strings.Join(parts, " ")}, nil
}

// ServerState is an argument of "set server ... state".
type ServerState string

const (
	StateReady ServerState = "ready"
	StateMaint ServerState = "maint"
	StateDrain ServerState = "drain"
)

// SetServerAddr: "set server <backend>/<server> addr <ip> port <port>".
func SetServerAddr(backend, server Word, addr netip.Addr, port int) (Command, error) {
	if _, err := Port(port); err != nil {
		return Command{}, err
	}
	return NewCommand(Lit("set"), Lit("server"), Concat(backend, Lit("/"), server),
		Lit("addr"), Addr(addr), Lit("port"), Num(port))
}

// SetServerState: "set server <backend>/<server> state ready|maint|drain".
func SetServerState(backend, server Word, state ServerState) (Command, error) {
	var s Word
	switch state {
	case StateReady:
		s = Lit("ready")
	case StateMaint:
		s = Lit("maint")
	case StateDrain:
		s = Lit("drain")
	default:
		return Command{}, errors.New("encode: unknown server state " + Printable(string(state)))
	}
	return NewCommand(Lit("set"), Lit("server"), Concat(backend, Lit("/"), server), Lit("state"), s)
}

// ShowServersState: "show servers state <backend>", the state of one
// backend's servers (without a backend HAProxy lists every backend of the
// process, which with hundreds of load balancers in a shard is large).
func ShowServersState(backend Word) (Command, error) {
	return NewCommand(Lit("show"), Lit("servers"), Lit("state"), backend)
}

// ShowFrontendStat: "show stat <frontend> 1 -1", the CSV counters of one
// frontend (type 1: frontends only, -1: every server id, of which a
// frontend has none), as a header line and one line.
func ShowFrontendStat(frontend Word) (Command, error) {
	return NewCommand(Lit("show"), Lit("stat"), frontend, Num(1), Num(-1))
}

// SetServerWeight: "set server <backend>/<server> weight <0-256>".
func SetServerWeight(backend, server Word, weight int) (Command, error) {
	if weight < 0 || weight > 256 {
		return Command{}, refuse("weight", "range", itoa(weight), "must be between 0 and 256")
	}
	return NewCommand(Lit("set"), Lit("server"), Concat(backend, Lit("/"), server), Lit("weight"), Num(weight))
}

// mapKeyCLIChars is what a map key sent on the runtime API may hold: a
// route key's characters (RouteKey) without ';', which the CLI reads as
// a command separator. The CLI has no quoting, and none of the others is
// special to it (HAProxy 2.6 stores "a.b/x~!$&()*+,=:@%-_./" as sent).
var mapKeyCLIChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~!$&()*+,=:@%/-")

// AddMap: "add map <file> <key> <value>", one entry appended to a map a
// running process loaded from file (its reference on the CLI). key is a
// route key (RouteKey, LandingKey) or a pier identifier or address;
// value is a pier identifier. A key with ';' is refused: the caller takes
// another way for it.
func AddMap(file, key, value Word) (Command, error) {
	return mapCommand("add", file, key, &value)
}

// SetMap: "set map <file> <key> <value>", the value of key's entries;
// key and value as for AddMap.
func SetMap(file, key, value Word) (Command, error) {
	return mapCommand("set", file, key, &value)
}

// DelMap: "del map <file> <key>", every entry of key.
func DelMap(file, key Word) (Command, error) {
	return mapCommand("del", file, key, nil)
}

// mapCommand is "<verb> map <file> <key> [<value>]".
func mapCommand(verb string, file, key Word, value *Word) (Command, error) {
	ref, err := cliMapRef(file)
	if err != nil {
		return Command{}, err
	}
	k, err := cliMapKey(key)
	if err != nil {
		return Command{}, err
	}
	line := verb + " map " + ref + " " + k
	if value != nil {
		v, err := NewCommand(*value)
		if err != nil {
			return Command{}, err
		}
		line += " " + v.line
	}
	return Command{line}, nil
}

// ClearMap: "clear map <file>", every entry.
func ClearMap(file Word) (Command, error) {
	ref, err := cliMapRef(file)
	if err != nil {
		return Command{}, err
	}
	return Command{"clear map " + ref}, nil
}

// cliMapRef is a map file path as a CLI word: FilePath's characters are
// all plain on the CLI.
func cliMapRef(file Word) (string, error) {
	if err := file.Err(); err != nil {
		return "", err
	}
	if file.kind != kindFile {
		return "", errors.New("encode: map reference is not a file path: " + Printable(file.s))
	}
	return file.s, nil
}

func cliMapKey(key Word) (string, error) {
	if err := key.Err(); err != nil {
		return "", err
	}
	if key.kind == kindFile || key.s == "" || key.s[0] == '#' {
		return "", errors.New("encode: not a map key: " + Printable(key.s))
	}
	for i := 0; i < len(key.s); i++ {
		if !mapKeyCLIChars[key.s[i]] {
			return "", errors.New("encode: map key on the runtime API contains " + describeByte(key.s[i]) + ": " + Printable(key.s))
		}
	}
	return key.s, nil
}
