package encode

import "strings"

// LogField is one field of the JSON object an access-log line is: a key
// of pier's and a value HAProxy fills in at log time. Every value is a
// Go constant of pier's (a log-format alias or a sample expression), so
// no user string is ever part of the format; what the client sent
// reaches the line only through HAProxy's json converter.
type LogField struct {
	key, value string
	err        error
}

// logNumbers are the log-format aliases that always print a number
// (milliseconds, a status, a byte count, a port, seconds), or -1.
var logNumbers = map[string]bool{"Ts": true, "ms": true, "Ta": true, "Tc": true, "Tr": true, "Tw": true, "Tt": true,
	"TR": true, "ST": true, "B": true, "U": true, "cp": true, "rc": true}

// logWords are the aliases that print text needing no JSON escape: an
// address, a port or "-", a section name of pier's (or "<NOSRV>"), the
// termination state's four letters.
var logWords = map[string]bool{"ci": true, "si": true, "sp": true, "f": true, "b": true, "s": true, "tsc": true}

var logKeyChars = charset("abcdefghijklmnopqrstuvwxyz_")

// sampleChars are those of a sample expression of pier's: fetch and
// converter names, their arguments, digits. No '%', ']', quote,
// backslash or space, which would end or escape the expression.
var sampleChars = charset("abcdefghijklmnopqrstuvwxyz0123456789_.(),?-")

// LogNumber is key: the number the alias prints ("Ta": total active
// milliseconds).
func LogNumber(key, alias keyword) LogField {
	f := logField(key, "%"+string(alias))
	if !logNumbers[string(alias)] {
		f.err = refuse("log field", "alias", string(alias), "is not a numeric log-format alias pier uses")
	}
	return f
}

// LogTime is key: the accept date as Unix seconds with milliseconds,
// a JSON number.
func LogTime(key keyword) LogField { return logField(key, "%Ts.%ms") }

// LogWord is key: the text the alias prints, quoted.
func LogWord(key, alias keyword) LogField {
	f := logField(key, `"%`+string(alias)+`"`)
	if !logWords[string(alias)] {
		f.err = refuse("log field", "alias", string(alias), "is not a log-format alias whose text is JSON-safe")
	}
	return f
}

// LogSample is key: the sample expression's string, JSON-escaped by
// HAProxy's json converter (utf8s: invalid UTF-8 is dropped, not
// passed on), quoted.
func LogSample(key, sample keyword) LogField {
	f := logField(key, `"%[`+string(sample)+`,json(utf8s)]"`)
	s := string(sample)
	if s == "" || len(s) > 128 {
		f.err = refuse("log field", "sample", s, "must be 1-128 characters")
	}
	for i := 0; f.err == nil && i < len(s); i++ {
		if !sampleChars[s[i]] {
			f.err = refuse("log field", "sample", s, "contains "+describeByte(s[i]))
		}
	}
	return f
}

func logField(key keyword, value string) LogField {
	f := LogField{key: string(key), value: value}
	k := string(key)
	if k == "" || len(k) > 32 {
		f.err = refuse("log field", "key", k, "must be 1-32 characters")
	}
	for i := 0; f.err == nil && i < len(k); i++ {
		if !logKeyChars[k[i]] {
			f.err = refuse("log field", "key", k, "contains "+describeByte(k[i])+"; keys are lowercase letters and '_'")
		}
	}
	return f
}

// AccessLogFormat is the log-format word of a JSON object holding
// fields in order: `{"k":v,...}`, single-quoted. Keys must differ.
func AccessLogFormat(fields ...LogField) Word {
	if len(fields) == 0 {
		return Word{err: refuse("log format", "fields", "", "needs at least one field")}
	}
	var b strings.Builder
	seen := map[string]bool{}
	b.WriteByte('{')
	for i, f := range fields {
		if f.err != nil {
			return Word{err: f.err}
		}
		if f.key == "" {
			return Word{err: refuse("log format", "field", "", "zero LogField")}
		}
		if seen[f.key] {
			return Word{err: refuse("log format", "key", f.key, "appears twice")}
		}
		seen[f.key] = true
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + f.key + `":` + f.value)
	}
	b.WriteByte('}')
	w := Word{s: b.String(), kind: kindIdent, quote: true}
	if err := quotable(w.s); err != nil {
		w.err = err
	}
	return w
}
