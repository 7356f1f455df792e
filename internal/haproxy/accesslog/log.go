// Package accesslog reads the access-log lines HAProxy sends the agent
// (render's accesslog.go), one datagram per request, and for each one
// counts the request in the per-request metrics, adds what HAProxy does
// not know (the Ingress, Service and pod that the section and server
// names stand for) and writes the line, as JSON, to the agent's output.
//
// HAProxy never waits for this reader: a datagram socket whose queue is
// full refuses the next line at once, and HAProxy counts it as dropped.
// So a slow output (a full pipe to the container runtime) costs log
// lines and counts, never requests; pier_access_log_dropped_total says
// how many.
package accesslog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
)

// Config configures a Log.
type Config struct {
	// Socket is the datagram socket's path (layout.AccessLog).
	Socket string
	// Output receives the lines; written through a buffer flushed every
	// FlushEvery.
	Output io.Writer
	// Options say which requests send a line and which are written
	// (render.PlanAccessLog); Options.Socket is set from Socket.
	Options render.AccessLogOptions
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// FlushEvery bounds how long a line waits in the output buffer.
const FlushEvery = 100 * time.Millisecond

// readBuffer asks the kernel for room for bursts of lines (capped by
// net.core.rmem_max).
const readBuffer = 4 << 20

// Log is the reader. Set and Delete keep its table of load balancers;
// Start binds the socket and reads until Close.
type Log struct {
	cfg Config

	mu  sync.RWMutex
	lbs map[string]*lbInfo

	conn *net.UnixConn
	// scratch is the line being written; only the reading goroutine
	// uses it.
	scratch []byte
	outMu   sync.Mutex
	out     *bufio.Writer
	done    chan struct{}
	stopped sync.WaitGroup
}

// New returns a Log that reads nothing yet.
func New(cfg Config) *Log {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Options.Socket = cfg.Socket
	return &Log{cfg: cfg, lbs: map[string]*lbInfo{}, out: bufio.NewWriterSize(cfg.Output, 64<<10), done: make(chan struct{})}
}

// Options are the render options of the lines this Log reads.
func (l *Log) Options() render.AccessLogOptions { return l.cfg.Options }

// Set records lb (applied or about to be): its lines are read with its
// names from now on.
func (l *Log) Set(lb *model.LoadBalancer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.lbs[lb.UUID]
	seen := &atomic.Uint64{}
	if old != nil {
		seen = old.seen
	}
	info := infoOf(lb, l.cfg.Options, l.cfg.Metrics, seen)
	info.errors = &errorRing{}
	if old != nil {
		info.errors = old.errors
	}
	if old != nil {
		kept := map[string]bool{}
		for _, r := range info.routes() {
			kept[labelKey(r)] = true
		}
		for _, r := range old.routes() {
			if !kept[labelKey(r)] {
				r.deleteMetrics(l.cfg.Metrics)
			}
		}
	}
	l.lbs[lb.UUID] = info
}

func labelKey(r *route) string { return r.namespace + "\x00" + r.ingress + "\x00" + r.service }

// Delete forgets load balancer uuid and its series.
func (l *Log) Delete(uuid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.lbs[uuid]; old != nil {
		for _, r := range old.routes() {
			r.deleteMetrics(l.cfg.Metrics)
		}
	}
	delete(l.lbs, uuid)
}

// Start binds the socket, replacing one a previous agent left, and
// reads it in the background until Close.
func (l *Log) Start() error {
	if err := os.Remove(l.cfg.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("access log socket: %w", err)
	}
	conn, err := listen(l.cfg.Socket, l.cfg.Logger)
	if err != nil {
		return fmt.Errorf("access log socket: %w", err)
	}
	// Only pier and HAProxy may send (see haproxydriver's
	// openAccessLogPath for workers of another user).
	if err := os.Chmod(l.cfg.Socket, 0o600); err != nil {
		conn.Close()
		return fmt.Errorf("access log socket: %w", err)
	}
	if err := conn.SetReadBuffer(readBuffer); err != nil {
		l.cfg.Logger.Debug("access log socket: could not size its buffer", "error", err)
	}
	l.conn = conn
	lines := make(chan []byte, backlog)
	l.stopped.Add(3)
	go l.read(lines)
	go l.process(lines)
	go l.flush()
	return nil
}

// Close stops reading, writes what is buffered and removes the socket:
// HAProxy's lines are dropped until the next agent binds it again.
func (l *Log) Close() error {
	if l.conn == nil {
		return nil
	}
	close(l.done)
	err := l.conn.Close()
	l.stopped.Wait()
	l.outMu.Lock()
	ferr := l.out.Flush()
	l.outMu.Unlock()
	os.Remove(l.cfg.Socket)
	l.conn = nil
	return errors.Join(err, ferr)
}

// backlog is how many lines wait between the socket and their
// processing: the socket's queue is short (queue.go), so read only
// copies each line out and hands it on, and a burst or a pause of the
// processing (a slow output, a GC) waits here instead of filling it.
const backlog = 8192

// read empties the socket into lines; a line that finds the backlog
// full is counted (overflow) and dropped, as HAProxy would drop it.
func (l *Log) read(lines chan<- []byte) {
	defer l.stopped.Done()
	defer close(lines)
	buf := make([]byte, 64<<10)
	for {
		n, err := l.conn.Read(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.cfg.Logger.Warn("access log socket: read failed, no more access logs", "error", err)
			}
			return
		}
		select {
		case lines <- append([]byte(nil), buf[:n]...):
		default:
			l.lineResult("overflow")
		}
	}
}

// process handles the lines read, in order.
func (l *Log) process(lines <-chan []byte) {
	defer l.stopped.Done()
	for b := range lines {
		l.handle(b)
	}
}

func (l *Log) flush() {
	defer l.stopped.Done()
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			l.outMu.Lock()
			if err := l.out.Flush(); err != nil {
				l.cfg.Logger.Debug("access log output", "error", err)
			}
			l.outMu.Unlock()
		}
	}
}

// lineResult counts a line's fate in pier_access_log_lines_total.
func (l *Log) lineResult(result string) {
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.AccessLogLines.WithLabelValues(result).Inc()
	}
}

// handle reads one datagram.
func (l *Log) handle(b []byte) {
	var in wire
	if err := decode(b, &in); err != nil {
		l.lineResult("malformed")
		return
	}
	uuid, _ := render.FrontendOf(in.Frontend)
	l.mu.RLock()
	info := l.lbs[uuid]
	l.mu.RUnlock()
	if info == nil {
		l.lineResult("unknown")
		return
	}
	r := info.routeOf(in.Backend)
	if l.cfg.Options.Metrics {
		count(r, &in)
	}
	var line Line
	made := false
	if isError(in.Status) {
		line, made = lineOf(&in, info, r), true
		info.errors.add(errorOf(&in, r, &line))
	}
	every := info.plan.AgentSample
	switch {
	case every == 0:
		l.lineResult("off")
		return
	case every > 1 && (info.seen.Add(1)-1)%uint64(every) != 0:
		l.lineResult("sampled")
		return
	}
	if !made {
		line = lineOf(&in, info, r)
	}
	l.scratch = append(appendLine(l.scratch[:0], &line), '\n')
	l.outMu.Lock()
	l.out.Write(l.scratch)
	l.outMu.Unlock()
	l.lineResult("written")
}

// count adds the request to r's metrics.
func count(r *route, in *wire) {
	if r.requests[0] == nil {
		return
	}
	r.requests[classOf(in.Status)].Inc()
	if in.Total >= 0 {
		r.seconds.Observe(float64(in.Total) / 1000)
	}
	if in.Response >= 0 && in.Server != noServer {
		r.upstream.Observe(float64(in.Response) / 1000)
	}
	if in.Sent > 0 {
		r.sent.Add(float64(in.Sent))
	}
	if in.Received > 0 {
		r.received.Add(float64(in.Received))
	}
}

// noServer is HAProxy's server name when none served the request.
const noServer = "<NOSRV>"

// wire is the line HAProxy sends (render's accessLogFormat).
type wire struct {
	Time       json.Number `json:"t"`
	Client     string      `json:"ca"`
	ClientPort int         `json:"cp"`
	Method     string      `json:"m"`
	Host       string      `json:"h"`
	Path       string      `json:"p"`
	Status     int         `json:"st"`
	Sent       int64       `json:"bo"`
	Received   int64       `json:"bi"`
	Total      int         `json:"ta"`
	Connect    int         `json:"tc"`
	Response   int         `json:"tr"`
	Queue      int         `json:"tw"`
	Frontend   string      `json:"f"`
	Backend    string      `json:"b"`
	Server     string      `json:"s"`
	Addr       string      `json:"sa"`
	Port       string      `json:"sp"`
	RequestID  string      `json:"id"`
	Term       string      `json:"ts"`
}

// Line is one access-log line as the agent writes it. Field names are
// those log pipelines know from ingress-nginx's and Envoy's JSON logs;
// durations are milliseconds, -1 for a phase that did not happen (no
// connection to a member, no response).
type Line struct {
	Time             string `json:"time"`
	ClientAddr       string `json:"client_addr"`
	ClientPort       int    `json:"client_port"`
	Method           string `json:"method,omitempty"`
	Host             string `json:"host,omitempty"`
	Path             string `json:"path,omitempty"`
	Status           int    `json:"status"`
	BytesSent        int64  `json:"bytes_sent"`
	BytesReceived    int64  `json:"bytes_received"`
	DurationMS       int    `json:"duration_ms"`
	ConnectMS        int    `json:"connect_ms"`
	ResponseMS       int    `json:"response_ms"`
	QueueMS          int    `json:"queue_ms"`
	Namespace        string `json:"namespace,omitempty"`
	Ingress          string `json:"ingress,omitempty"`
	RouteKind        string `json:"route_kind,omitempty"`
	Service          string `json:"service,omitempty"`
	ServicePort      string `json:"service_port,omitempty"`
	Member           string `json:"member,omitempty"`
	Pod              string `json:"pod,omitempty"`
	RequestID        string `json:"request_id,omitempty"`
	LoadBalancer     string `json:"load_balancer"`
	TerminationState string `json:"termination_state"`
}

// dash is HAProxy's text for an empty sample.
func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

func lineOf(in *wire, info *lbInfo, r *route) Line {
	out := Line{Time: timeOf(in.Time), ClientAddr: in.Client, ClientPort: in.ClientPort,
		Method: dash(in.Method), Host: dash(in.Host), Path: dash(in.Path), Status: in.Status,
		BytesSent: in.Sent, BytesReceived: in.Received,
		DurationMS: in.Total, ConnectMS: in.Connect, ResponseMS: in.Response, QueueMS: in.Queue,
		Namespace: r.namespace, Ingress: r.ingress, RouteKind: r.kind, Service: r.service, ServicePort: r.port,
		RequestID: dash(in.RequestID), LoadBalancer: info.name, TerminationState: in.Term}
	if addr, port := dash(in.Addr), dash(in.Port); addr != "" && port != "" && in.Server != noServer {
		out.Member = net.JoinHostPort(addr, port)
		out.Pod = r.pod(addr, port)
	}
	return out
}

// timeOf turns HAProxy's "seconds.milliseconds" into RFC 3339 UTC.
func timeOf(n json.Number) string {
	t := timeAt(n)
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02T15:04:05.000Z07:00")
}

func cutDot(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "0", false
}
