package accesslog

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// The reader decodes and encodes lines by hand: encoding/json's
// reflection was three quarters of the agent's 10 µs per line, and a
// node at thousands of requests a second spends that beside HAProxy.
// The wire format is pier's own (flat, keys without escapes, values
// numbers or strings); TestCodecMatchesEncodingJSON holds both
// directions to encoding/json.

var errSyntax = errors.New("access log line: not the wire format")

// decode reads one wire line into w. Unknown keys are skipped.
func decode(b []byte, w *wire) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errSyntax
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errSyntax
		}
		end := i + 1
		for end < len(b) && b[end] != '"' && b[end] != '\\' {
			end++
		}
		if end >= len(b) || b[end] != '"' {
			return errSyntax
		}
		key := string(b[i+1 : end])
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		i = skipSpace(b, i+1)
		var err error
		if i < len(b) && b[i] == '"' {
			var s string
			if s, i, err = decodeString(b, i); err != nil {
				return err
			}
			if err := w.setString(key, s); err != nil {
				return err
			}
		} else {
			start := i
			for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ' ' {
				i++
			}
			if err := w.setNumber(key, string(b[start:i])); err != nil {
				return err
			}
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return errSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if skipSpace(b, i+1) != len(b) {
				return errSyntax
			}
			return nil
		default:
			return errSyntax
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// decodeString reads the JSON string at b[i] and returns it and the
// index after it. One without escapes is sliced; encoding/json reads the
// others.
func decodeString(b []byte, i int) (string, int, error) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			escaped = true
			j++
		case c < 0x20:
			return "", 0, errSyntax
		case c == '"':
			if !escaped {
				if !utf8.Valid(b[i+1 : j]) {
					return "", 0, errSyntax
				}
				return string(b[i+1 : j]), j + 1, nil
			}
			var s string
			if err := json.Unmarshal(b[i:j+1], &s); err != nil {
				return "", 0, errSyntax
			}
			return s, j + 1, nil
		}
	}
	return "", 0, errSyntax
}

// numberKeys are the wire's numeric fields; the others are strings,
// and a value of the other kind is refused, as encoding/json does.
var numberKeys = map[string]bool{"t": true, "cp": true, "st": true, "bo": true, "bi": true, "ta": true, "tc": true, "tr": true, "tw": true}

var stringKeys = map[string]bool{"ca": true, "m": true, "h": true, "p": true, "f": true, "b": true, "s": true, "sa": true, "sp": true, "id": true, "ts": true}

func (w *wire) setString(key, s string) error {
	if numberKeys[key] {
		return errSyntax
	}
	switch key {
	case "ca":
		w.Client = s
	case "m":
		w.Method = s
	case "h":
		w.Host = s
	case "p":
		w.Path = s
	case "f":
		w.Frontend = s
	case "b":
		w.Backend = s
	case "s":
		w.Server = s
	case "sa":
		w.Addr = s
	case "sp":
		w.Port = s
	case "id":
		w.RequestID = s
	case "ts":
		w.Term = s
	}
	return nil
}

func (w *wire) setNumber(key, n string) error {
	if stringKeys[key] {
		return errSyntax
	}
	if key == "t" {
		if _, err := strconv.ParseFloat(n, 64); err != nil {
			return errSyntax
		}
		w.Time = json.Number(n)
		return nil
	}
	var dst *int
	switch key {
	case "cp":
		dst = &w.ClientPort
	case "st":
		dst = &w.Status
	case "ta":
		dst = &w.Total
	case "tc":
		dst = &w.Connect
	case "tr":
		dst = &w.Response
	case "tw":
		dst = &w.Queue
	case "bo", "bi":
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return errSyntax
		}
		if key == "bo" {
			w.Sent = v
		} else {
			w.Received = v
		}
		return nil
	default:
		if _, err := strconv.ParseFloat(n, 64); err != nil {
			return errSyntax
		}
		return nil
	}
	v, err := strconv.Atoi(n)
	if err != nil {
		return errSyntax
	}
	*dst = v
	return nil
}

// appendLine appends l as encoding/json would write it (omitempty
// fields left out), without its HTML escapes.
func appendLine(b []byte, l *Line) []byte {
	b = append(b, '{')
	first := true
	str := func(key, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":`...)
		b = appendString(b, v)
	}
	num := func(key string, v int64) {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, v, 10)
	}
	str("time", l.Time, false)
	str("client_addr", l.ClientAddr, false)
	num("client_port", int64(l.ClientPort))
	str("method", l.Method, true)
	str("host", l.Host, true)
	str("path", l.Path, true)
	num("status", int64(l.Status))
	num("bytes_sent", l.BytesSent)
	num("bytes_received", l.BytesReceived)
	num("duration_ms", int64(l.DurationMS))
	num("connect_ms", int64(l.ConnectMS))
	num("response_ms", int64(l.ResponseMS))
	num("queue_ms", int64(l.QueueMS))
	str("namespace", l.Namespace, true)
	str("ingress", l.Ingress, true)
	str("route_kind", l.RouteKind, true)
	str("service", l.Service, true)
	str("service_port", l.ServicePort, true)
	str("member", l.Member, true)
	str("pod", l.Pod, true)
	str("request_id", l.RequestID, true)
	str("load_balancer", l.LoadBalancer, false)
	str("termination_state", l.TerminationState, false)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: '"', '\' and control bytes
// escaped, invalid UTF-8 replaced by U+FFFD as encoding/json does, and
// U+2028 and U+2029 escaped for JavaScript readers, as it does too.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
