package encode

import "strconv"

// maxShown is how much of an offending value an error message repeats:
// enough to recognise it, too little to flood an Event or a log line.
const maxShown = 64

// Error is a refusal. Kind names the value type ("host", "path"), Rule the
// rule that failed (stable, short, usable in tests and metrics) and Msg says
// what to fix. Value is the offending input made printable and truncated,
// so Error() is safe to put in a Kubernetes Event, a status condition or a
// log line as it is.
type Error struct {
	Kind  string
	Rule  string
	Value string
	Msg   string
}

func (e *Error) Error() string {
	return "invalid " + e.Kind + " \"" + e.Value + "\": " + e.Msg + " [rule " + e.Rule + "]"
}

func refuse(kind, rule, value, msg string) *Error {
	return &Error{Kind: kind, Rule: rule, Value: Printable(value), Msg: msg}
}

// Printable returns s with every byte outside printable ASCII written as
// \xNN (and '\' and '"' escaped), truncated to 64 input bytes. Bidi and
// zero-width characters therefore never reach a terminal or an Event raw
// It is not an HAProxy encoder: use it for messages only.
func Printable(s string) string {
	cut := s
	if len(cut) > maxShown {
		cut = cut[:maxShown]
	}
	out := make([]byte, 0, len(cut)+8)
	for i := 0; i < len(cut); i++ {
		c := cut[i]
		switch {
		case c == '\\' || c == '"':
			out = append(out, '\\', c)
		case c >= 0x20 && c < 0x7f:
			out = append(out, c)
		default:
			out = append(out, '\\', 'x', hexDigit[c>>4], hexDigit[c&15])
		}
	}
	if len(cut) < len(s) {
		out = append(out, "...("...)
		out = strconv.AppendInt(out, int64(len(s)), 10)
		out = append(out, " bytes)"...)
	}
	return string(out)
}

const hexDigit = "0123456789abcdef"

// describeByte names a byte for an error message without printing it raw.
func describeByte(c byte) string {
	switch c {
	case ' ':
		return "a space"
	case '\t':
		return "a tab"
	case '\n':
		return "a line feed"
	case '\r':
		return "a carriage return"
	case 0:
		return "a NUL byte"
	case '\'':
		return "a single quote"
	case '"':
		return "a double quote"
	case '\\':
		return "a backslash"
	case '#':
		return "'#'"
	}
	if c < 0x20 || c >= 0x7f {
		return "byte 0x" + string([]byte{hexDigit[c>>4], hexDigit[c&15]})
	}
	return "'" + string(c) + "'"
}
