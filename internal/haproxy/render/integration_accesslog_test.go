package render

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/internal/model"
)

// accessLine is the part of a line the tests read.
type accessLine struct {
	Host      string `json:"h"`
	Path      string `json:"p"`
	Method    string `json:"m"`
	Status    int    `json:"st"`
	Frontend  string `json:"f"`
	Backend   string `json:"b"`
	Server    string `json:"s"`
	Addr      string `json:"sa"`
	Port      string `json:"sp"`
	RequestID string `json:"id"`
	Total     int    `json:"ta"`
	Term      string `json:"ts"`
}

// TestIntegrationAccessLog runs the rendered frontend with a real
// HAProxy that logs to a datagram socket: one line per request, each a
// JSON object naming the backend and server that answered, the request
// id the backend got, and whatever the client put in Host and path
// escaped, never breaking the object. With the agent's metrics off and
// sample=5, HAProxy sends one request in five.
func TestIntegrationAccessLog(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	lines := listenLog(t, sock)
	web := pool("web", memberAt(startBackend(t, "web")))
	addr := serveLogged(t, bin, web, AccessLogOptions{Socket: sock, Default: model.AccessLogOn, Metrics: true})

	resp, err := http.Get("http://" + addr + "/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", "http://"+addr+"/x/y?secret=1", nil)
	req.Host = "a.test"
	req.Header.Set("X-Request-ID", "trace-42")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// What a client may put in a request line and Host that a JSON string
	// must escape: quotes, backslashes, bytes above 0x7f (HAProxy answers
	// 400 to those in a path, not in a header).
	raw(t, addr, "GET /q\"\\?x HTTP/1.1\r\nHost: a.test\r\n\r\n")
	raw(t, addr, "GET / HTTP/1.1\r\nHost: \"a\\b\xc3\xa9\xff\r\n\r\n")

	// Lines come as transactions end, not in the order sent.
	got := map[string]accessLine{}
	for _, l := range readLines(t, lines, 4) {
		got[l.Path] = l
	}
	notFound, routed := got["/nowhere"], got["/x/y"]
	if notFound.Status != 404 || notFound.Backend != "pier_404_"+fixtureUUID || notFound.Server != "<NOSRV>" ||
		len(notFound.RequestID) != 36 {
		t.Errorf("404 line: %+v", notFound)
	}
	uuid, ok := FrontendOf(routed.Frontend)
	if pid, _ := PoolOf(uuid, routed.Backend); !ok || uuid != fixtureUUID || pid != web.ID {
		t.Errorf("routed line names %s and %s", routed.Frontend, routed.Backend)
	}
	if routed.Status != 200 || routed.Method != "GET" || routed.Host != "a.test" || routed.Path != "/x/y" ||
		routed.Server != "s1" || routed.Addr+":"+routed.Port != web.Members[0].Address+":"+strconv.Itoa(web.Members[0].Port) ||
		routed.RequestID != "trace-42" || routed.Term != "----" || routed.Total < 0 {
		t.Errorf("routed line: %+v", routed)
	}
	if _, ok := got["/q\"\\"]; !ok {
		t.Errorf("escaped path did not come back: %+v", got)
	}
	// HAProxy 3.0 refuses a Host outside the authority grammar with 400
	// before any sample is taken (a "-" line, PR--); 2.6 forwards it and
	// the line must carry it escaped.
	if v, err := process.BinaryVersion(context.Background(), bin); err != nil {
		t.Fatal(err)
	} else if v.AtLeast(3, 0) {
		if l, ok := got["-"]; !ok || l.Status != 400 || l.Term != "PR--" {
			t.Errorf("odd Host under HAProxy %s: want a 400 PR-- line, got %+v", v, got)
		}
	} else if h := got["/"].Host; h != "\"a\\b\u00e9" {
		t.Errorf("odd Host came back as %q (status %d)", h, got["/"].Status)
	}

	// Sampled by HAProxy: the agent counts nothing, so only one in five
	// is sent.
	sampled := serveLogged(t, bin, web, AccessLogOptions{Socket: sock, Default: model.AccessLog{Sample: 5}})
	for range 50 {
		raw(t, sampled, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	}
	readLines(t, lines, 10)
	select {
	case l := <-lines:
		t.Errorf("an 11th line of 50 requests sampled 1:5: %s", l)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestAccessLogOff: off with the metrics off sends nothing; the metrics
// on send every request whatever the mode.
func TestAccessLogOff(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
	for _, tt := range []struct {
		ann     string
		metrics bool
		want    AccessLogPlan
	}{
		{"off", false, AccessLogPlan{}},
		{"off", true, AccessLogPlan{Send: true, HAProxySample: 1, AgentSample: 0}},
		{"sample=3", true, AccessLogPlan{Send: true, HAProxySample: 1, AgentSample: 3}},
		{"sample=3", false, AccessLogPlan{Send: true, HAProxySample: 3, AgentSample: 1}},
		{"", false, AccessLogPlan{Send: true, HAProxySample: 1, AgentSample: 1}},
	} {
		lb.AccessLog = tt.ann
		o := AccessLogOptions{Socket: "/run/pier/log.sock", Default: model.AccessLogOn, Metrics: tt.metrics}
		if got := PlanAccessLog(lb, o); got != tt.want {
			t.Errorf("%q metrics %v: %+v, want %+v", tt.ann, tt.metrics, got, tt.want)
		}
		cfg, err := Config(lb, Options{Dir: "/tmp/x", AccessLog: o})
		if err != nil {
			t.Fatal(err)
		}
		if logs := strings.Contains(string(cfg), "log /run/pier/log.sock"); logs != tt.want.Send {
			t.Errorf("%q metrics %v: log line present %v", tt.ann, tt.metrics, logs)
		}
	}
	if PlanAccessLog(lb, AccessLogOptions{Default: model.AccessLogOn, Metrics: true}).Send {
		t.Error("no socket, yet lines are sent")
	}
}

// serveLogged runs a load balancer routing a.test to web with access
// logs as o says, in a HAProxy of its own, and returns its address.
func serveLogged(t *testing.T, bin string, web model.Pool, o AccessLogOptions) string {
	t.Helper()
	dir := t.TempDir()
	port := freePort()
	listener := httpListener("", routes(toPool(web, hostIs("a.test"))))
	listener.Port = port
	lb := newLB([]model.Listener{listener}, web)
	lb.VIP, lb.FIP = "127.0.0.1", ""
	opts := Options{Dir: dir, MinSlots: 2, AccessLog: o}
	cfg, err := Config(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	if o.Default.Sample > 1 && !o.Metrics && !strings.Contains(string(cfg), " sample 1:"+strconv.Itoa(o.Default.Sample)+" local0") {
		t.Fatalf("no sample in:\n%s", cfg)
	}
	maps, err := Maps(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	writeMaps(t, maps, "")
	writeFile(t, filepath.Join(dir, "haproxy.conf"), cfg)
	startHAProxy(t, bin, filepath.Join(dir, "haproxy.conf"), port)
	return "127.0.0.1:" + strconv.Itoa(port)
}

func listenLog(t *testing.T, path string) <-chan string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	out := make(chan string, 100)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(out)
				return
			}
			out <- string(buf[:n])
		}
	}()
	return out
}

func readLines(t *testing.T, lines <-chan string, n int) []accessLine {
	t.Helper()
	var out []accessLine
	for len(out) < n {
		select {
		case l := <-lines:
			var a accessLine
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatalf("line %d is not JSON: %v\n%s", len(out)+1, err, l)
			}
			out = append(out, a)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d lines, want %d", len(out), n)
		}
	}
	return out
}

// raw sends one request as written and reads the answer's head.
func raw(t *testing.T, addr, request string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, request)
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
