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
// User-derived Values are refused outright (R9).
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

// SetServerWeight: "set server <backend>/<server> weight <0-256>".
func SetServerWeight(backend, server Word, weight int) (Command, error) {
	if weight < 0 || weight > 256 {
		return Command{}, refuse("weight", "range", itoa(weight), "must be between 0 and 256")
	}
	return NewCommand(Lit("set"), Lit("server"), Concat(backend, Lit("/"), server), Lit("weight"), Num(weight))
}

// AddMap: "add map <file> <key> <value>"; SetMap: "set map <file> <key>
// <value>"; DelMap: "del map <file> <key>". A map is named by the file
// the running configuration loaded it from. Route keys come from users'
// hosts and paths, so unlike other commands these take user words, held
// to the same allow-list as every runtime word (R9: no space, ';', '\',
// '#', control byte or quote can reach the CLI): a key outside it is
// refused, and its change goes through a reload instead.
func AddMap(file, key, value Word) (Command, error) {
	return mapCommand("add", file, key, value)
}

// SetMap: see AddMap.
func SetMap(file, key, value Word) (Command, error) {
	return mapCommand("set", file, key, value)
}

// DelMap: see AddMap.
func DelMap(file, key Word) (Command, error) {
	return mapCommand("del", file, key)
}

func mapCommand(verb string, file Word, entry ...Word) (Command, error) {
	if file.err == nil && file.kind != kindFile {
		return Command{}, errors.New("encode: a map is named by its file: " + Printable(file.s))
	}
	parts := []string{verb, "map"}
	for _, w := range append([]Word{file}, entry...) {
		if err := w.Err(); err != nil {
			return Command{}, err
		}
		if w.s == "" {
			return Command{}, errors.New("encode: empty word in a map command")
		}
		for j := 0; j < len(w.s); j++ {
			if !cliChars[w.s[j]] {
				return Command{}, errors.New("encode: map command word contains " + describeByte(w.s[j]) + ": " + Printable(w.s))
			}
		}
		parts = append(parts, w.s)
	}
	return Command{strings.Join(parts, " ")}, nil
}
