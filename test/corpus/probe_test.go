package corpus

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// probe is one request a served Ingress must answer as written.
type probe struct {
	https      bool // to the HTTPS port, SNI host; certificates are not checked
	host, path string
	header     map[string]string
	basic      [2]string // user, password
	status     int       // 0: 200
	// service is the backend that must answer a 200 ("one", "tls", …).
	service string
	// backendPath and backendHost, when set, are what the backend must
	// have received.
	backendPath, backendHost string
	// location is the Location of a redirect.
	location string
	// respHeader is a response header that must hold a value ("" value:
	// must be absent).
	respHeader [2]string
}

func (p probe) String() string {
	scheme := "http"
	if p.https {
		scheme = "https"
	}
	return scheme + "://" + p.host + p.path
}

// answer is what the backends reply, the echo's fields the test reads.
type answer struct {
	Service string `json:"service"`
	Path    string `json:"path"`
	Host    string `json:"host"`
}

// send runs p against the load balancer at vip and returns what is wrong
// with the answer, "" when nothing is.
func (p probe) send(vip string, httpPort, httpsPort int) string {
	port := httpPort
	if p.https {
		port = httpsPort
	}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(vip, strconv.Itoa(port)))
	}
	client := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: p.host}}, // #nosec: a test's own certificates
	}
	scheme := "http"
	if p.https {
		scheme = "https"
	}
	req, err := http.NewRequest(http.MethodGet, scheme+"://"+net.JoinHostPort(p.host, strconv.Itoa(port))+p.path, nil)
	if err != nil {
		return err.Error()
	}
	req.Host = p.host
	for k, v := range p.header {
		req.Header.Set(k, v)
	}
	if p.basic[0] != "" {
		req.SetBasicAuth(p.basic[0], p.basic[1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	want := p.status
	if want == 0 {
		want = http.StatusOK
	}
	var problems []string
	if resp.StatusCode != want {
		problems = append(problems, fmt.Sprintf("status %d, want %d (%.80q)", resp.StatusCode, want, body))
	}
	if p.location != "" && resp.Header.Get("Location") != p.location {
		problems = append(problems, fmt.Sprintf("Location %q, want %q", resp.Header.Get("Location"), p.location))
	}
	if name := p.respHeader[0]; name != "" {
		got := strings.Join(resp.Header.Values(name), ",")
		if (p.respHeader[1] == "" && got != "") || !strings.Contains(got, p.respHeader[1]) {
			problems = append(problems, fmt.Sprintf("header %s %q, want %q", name, got, p.respHeader[1]))
		}
	}
	if p.service != "" && resp.StatusCode == http.StatusOK {
		var a answer
		if err := json.Unmarshal(body, &a); err != nil {
			problems = append(problems, fmt.Sprintf("not a backend's answer: %.80q", body))
		} else {
			if a.Service != p.service {
				problems = append(problems, fmt.Sprintf("answered by %q, want %q", a.Service, p.service))
			}
			if p.backendPath != "" && a.Path != p.backendPath {
				problems = append(problems, fmt.Sprintf("backend saw path %q, want %q", a.Path, p.backendPath))
			}
			if p.backendHost != "" && a.Host != p.backendHost {
				problems = append(problems, fmt.Sprintf("backend saw Host %q, want %q", a.Host, p.backendHost))
			}
		}
	}
	return strings.Join(problems, "; ")
}
