package render

import "pier.dev/pier/internal/encode"

// Drain is a process-wide switch: while proc.pier_drain is a non-zero
// integer, every HTTP response of every frontend carries "Connection:
// close", and HAProxy 2.6 closes the client connection once that
// response is sent (measured with a keep-alive client). Clients then
// open new connections, which follow the addresses to the other node of
// a pair, instead of reusing one that a handover would cut.
//
// process.conf sets its initial value (ProcessConf), so a process that
// starts or reloads while draining drains from its first response; a
// running process is switched with DrainCommands over the runtime API.
// The test is one lookup of a process variable and no pattern. Measured
// on 2.6.12, one thread, keep-alive requests answered by HAProxy itself
// (about 9 µs of CPU each): 100 copies of the rule added 3.5 µs, so one
// costs about 35 ns a response, under 0.5%; one copy is within noise.
//
// HTTP/2 is not drained: its mux drops the Connection header, and 2.6
// has no rule action that sends GOAWAY. Only the TLS binds that need h2
// offer it by ALPN (a Gateway listener's misdirected-request check, gRPC
// routes: frontend.go); there, and for a client speaking h2 with prior
// knowledge on a clear port, a connection is kept through the drain.
const drainVar = "proc.pier_drain"

// drainRule is the frontend line. http-after-response also covers
// HAProxy's own answers (404, 403, 400).
func drainRule(c *encode.Config) {
	c.Line(encode.Lit("http-after-response"), encode.Lit("set-header"), encode.Lit("Connection"), encode.Lit("close"),
		ifWord, openBrace, encode.Lit("var("+drainVar+")"), encode.Lit("-m"), encode.Lit("bool"), closeBrace)
}

// Sample expressions of the switch's two values.
const (
	drainOn  = "int(1)"
	drainOff = "int(0)"
)

// drainInit is process.conf's line that gives the switch its value at
// start.
func drainInit(c *encode.Config, on bool) {
	value := encode.Lit(drainOff)
	if on {
		value = encode.Lit(drainOn)
	}
	c.Line(encode.Lit("set-var"), encode.Lit(drainVar), value)
}

// DrainCommands are the runtime API commands, in order and over one
// connection, that switch a running process's drain on or off. HAProxy
// 2.6 accepts "set var" only in experimental mode, which lasts for the
// connection; it has no "unset var", hence 0 for off. Both answer
// nothing when they succeed.
func DrainCommands(on bool) []string {
	value := drainOff
	if on {
		value = drainOn
	}
	return []string{"experimental-mode on", "set var " + drainVar + " " + value}
}
