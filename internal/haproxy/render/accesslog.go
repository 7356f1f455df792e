package render

import (
	"strconv"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// Access logs. Every HTTP frontend that logs sends one datagram per
// request, a JSON object (accessLogFormat), to the agent's Unix datagram
// socket; the agent (package accesslog) adds the names of the Ingress,
// Service and pod, counts the request in its metrics and writes the line.
// HAProxy never waits for the agent: when the socket is missing or its
// queue is full the line is dropped, and counted in `show info`'s
// DroppedLogs. Section names carry UUIDs and pool ids only, so no user
// string is part of the configuration; what the client sent reaches the
// line through the json converter alone.

// AccessLogOptions say where the lines go and which requests send one.
type AccessLogOptions struct {
	// Socket is the agent's datagram socket; empty sends nothing.
	Socket string
	// Default is the access logging of a load balancer whose Ingresses
	// ask for none (model.AccessLogOf).
	Default model.AccessLog
	// Metrics: the agent counts every request from its line, so every
	// request sends one, and sampling is the agent's.
	Metrics bool
}

// AccessLogPlan is who sends and who samples a load balancer's lines.
type AccessLogPlan struct {
	// Send: the frontends log to the socket.
	Send bool
	// HAProxySample: HAProxy sends one request in this many (log ...
	// sample 1:N); 1: every request.
	HAProxySample int
	// AgentSample: the agent writes one line in this many of those it
	// receives; 0: none (it still counts them when Metrics).
	AgentSample int
}

// PlanAccessLog is the rule, one place for render and the agent:
//
//   - no socket: nothing is sent;
//   - metrics on: every request is sent (the counters and histograms
//     are exact), and the agent writes the lines the mode asks for, one
//     in N for sample=N, none for off;
//   - metrics off: HAProxy samples (sample 1:N) and the agent writes
//     every line it gets; off sends nothing.
func PlanAccessLog(lb *model.LoadBalancer, o AccessLogOptions) AccessLogPlan {
	mode := model.AccessLogOf(lb, o.Default)
	switch {
	case o.Socket == "":
		return AccessLogPlan{}
	case o.Metrics:
		return AccessLogPlan{Send: true, HAProxySample: 1, AgentSample: mode.Sample}
	case mode.Sample == 0:
		return AccessLogPlan{}
	}
	return AccessLogPlan{Send: true, HAProxySample: mode.Sample, AgentSample: 1}
}

// accessLogLineLen bounds a line: the captured URI is at most
// tune.http.logurilen (1024) bytes, six times that when every byte is
// escaped, plus the Host and the rest.
const accessLogLineLen = 8192

// accessLogFormat is the line, with the keys package accesslog reads:
// the accept time, client, request, status, byte counts, timers
// (milliseconds, -1 when a phase did not happen), the frontend, backend
// and server that handled it, the member's address, the X-Request-ID
// forwarded (forwarding.go) and the termination state.
var accessLogFormat = encode.AccessLogFormat(
	encode.LogTime("t"),
	encode.LogWord("ca", "ci"), encode.LogNumber("cp", "cp"),
	encode.LogSample("m", "capture.req.method"),
	encode.LogSample("h", "capture.req.hdr(0)"),
	encode.LogSample("p", "capture.req.uri,field(1,?)"),
	encode.LogNumber("st", "ST"), encode.LogNumber("bo", "B"), encode.LogNumber("bi", "U"),
	encode.LogNumber("ta", "Ta"), encode.LogNumber("tc", "Tc"), encode.LogNumber("tr", "Tr"), encode.LogNumber("tw", "Tw"),
	encode.LogWord("f", "f"), encode.LogWord("b", "b"), encode.LogWord("s", "s"),
	encode.LogWord("sa", "si"), encode.LogWord("sp", "sp"),
	encode.LogSample("id", "var(txn.pier_rid)"),
	encode.LogWord("ts", "tsc"),
)

// writeAccessLog writes a frontend's log target and format; the request
// id is captured later, after the forwarding rules set it
// (captureRequestID).
func writeAccessLog(c *encode.Config, plan AccessLogPlan, socket string) {
	if !plan.Send {
		return
	}
	words := []encode.Word{encode.Lit("log"), encode.FilePath(socket), encode.Lit("len"), encode.Num(accessLogLineLen),
		encode.Lit("format"), encode.Lit("raw")}
	if plan.HAProxySample > 1 {
		words = append(words, encode.Lit("sample"), encode.Concat(encode.Lit("1:"), encode.Num(plan.HAProxySample)))
	}
	c.Line(append(words, encode.Lit("local0"))...)
	// A connection that sends no request is no request: no line.
	c.Line(encode.Lit("option"), encode.Lit("dontlognull"))
	// Capture slot 0, which the format reads: the request's buffer is
	// gone by the time the line is built.
	c.Line(encode.Lit("capture"), encode.Lit("request"), encode.Lit("header"), encode.Lit("Host"), encode.Lit("len"), encode.Num(255))
	c.Line(encode.Lit("log-format"), accessLogFormat)
}

// captureRequestID keeps the X-Request-ID sent to the backend for the
// line.
func captureRequestID(c *encode.Config, plan AccessLogPlan) {
	if plan.Send {
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_rid)"), encode.Lit("req.fhdr(x-request-id)"))
	}
}

// Section names the access-log reader maps back to the model.

// FrontendOf returns the load balancer UUID of a frontend name
// fe_<uuid>_<port>.
func FrontendOf(name string) (uuid string, ok bool) {
	rest, ok := strings.CutPrefix(name, "fe_")
	if !ok {
		return "", false
	}
	uuid, port, ok := strings.Cut(rest, "_")
	if !ok {
		return "", false
	}
	if _, err := strconv.Atoi(port); err != nil {
		return "", false
	}
	return uuid, true
}

// PoolOf returns the pool id of a backend name be_<uuid>_<pool id> of
// load balancer uuid.
func PoolOf(uuid, backend string) (poolID string, ok bool) {
	return strings.CutPrefix(backend, "be_"+uuid+"_")
}
