package conformance

import (
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cucumber/godog"
)

// errNoRequest is returned by assertions run before any request was sent.
var errNoRequest = errors.New("no request has been sent in this scenario")

// exchange is the last request/response pair of a scenario.
type exchange struct {
	req *capturedRequest
	res *capturedResponse
}

func (e exchange) check() error {
	if e.req == nil || e.res == nil {
		return errNoRequest
	}
	return nil
}

func (e exchange) statusCode(want int) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.res.StatusCode != want {
		return fmt.Errorf("expected status code %d but %d was returned", want, e.res.StatusCode)
	}
	return nil
}

func (e exchange) servedBy(service string) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.req.Service != service {
		return fmt.Errorf("expected the request to be served by %q but it was served by %q", service, e.req.Service)
	}
	return nil
}

func (e exchange) requestHost(host string) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.req.Host != host {
		return fmt.Errorf("expected the request host to be %q but was %q", host, e.req.Host)
	}
	return nil
}

func (e exchange) responseProto(proto string) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.res.Proto != proto {
		return fmt.Errorf("expected the response protocol to be %q but it was %q", proto, e.res.Proto)
	}
	return nil
}

func (e exchange) requestProto(proto string) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.req.Proto != proto {
		return fmt.Errorf("expected the request protocol to be %q but it was %q", proto, e.req.Proto)
	}
	return nil
}

func (e exchange) method(method string) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.req.Method != method {
		return fmt.Errorf("expected the request method to be %q but it was %q", method, e.req.Method)
	}
	return nil
}

// requestPath compares the raw request URI the backend saw with path, a
// leading slash added when missing ("" means "/").
func (e exchange) requestPath(path string) error {
	if err := e.check(); err != nil {
		return err
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if e.req.Path != path {
		return fmt.Errorf("expected the request path to be %q but it was %q", path, e.req.Path)
	}
	return nil
}

func (e exchange) responseHeader(key, value string) error {
	if err := e.check(); err != nil {
		return err
	}
	return headerHas("response", e.res.Headers, key, value)
}

func (e exchange) requestHeader(key, value string) error {
	if err := e.check(); err != nil {
		return err
	}
	return headerHas("request", e.req.Headers, key, value)
}

// headerHas looks key up exactly as written (the tables use canonical
// names); value "*" accepts any value, otherwise one value must be equal.
func headerHas(which string, headers map[string][]string, key, value string) error {
	values, ok := headers[key]
	if !ok {
		return fmt.Errorf("expected %s headers to contain %s but it only contained %v", which, key, headers)
	}
	if value == "*" {
		return nil
	}
	for _, v := range values {
		if v == value {
			return nil
		}
	}
	return fmt.Errorf("expected %s headers %s to contain a %q value but it contained %q", which, key, value, values)
}

// headerTable runs check on each row of a two-column table whose first row
// is the "key | value" header.
func headerTable(table *godog.Table, check func(key, value string) error) error {
	if table == nil || len(table.Rows) < 2 {
		return fmt.Errorf("expected a table with a header row and at least one row")
	}
	for i, row := range table.Rows {
		if len(row.Cells) != 2 {
			return fmt.Errorf("expected a table with 2 cells per row, row %d has %d", i+1, len(row.Cells))
		}
		key, value := row.Cells[0].Value, row.Cells[1].Value
		if i == 0 {
			if key != "key" || value != "value" {
				return fmt.Errorf("expected a header row of 'key' and 'value' but got %q and %q", key, value)
			}
			continue
		}
		if err := check(key, value); err != nil {
			return err
		}
	}
	return nil
}

// secureConnection checks the certificate served over HTTPS: its first DNS
// name is hostname (upstream's check), it is valid for hostname, and, when
// the scenario generated certificates, it chains to one of them.
func (e exchange) secureConnection(hostname string, roots *x509.CertPool) error {
	if err := e.check(); err != nil {
		return err
	}
	chain := e.res.PeerCertificates
	if len(chain) == 0 {
		return fmt.Errorf("hostname verification requires executing a request to an HTTPS URL")
	}
	leaf := chain[0]
	if len(leaf.DNSNames) == 0 {
		return fmt.Errorf("expected the response TLS hostname to be %q but the certificate (subject %q) has no DNS names", hostname, leaf.Subject)
	}
	if leaf.DNSNames[0] != hostname {
		return fmt.Errorf("expected the response TLS hostname to be %q but was %q", hostname, leaf.DNSNames[0])
	}
	if err := leaf.VerifyHostname(hostname); err != nil {
		return err
	}
	if roots == nil {
		return nil
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: hostname, Roots: roots, Intermediates: inter}); err != nil {
		return fmt.Errorf("served certificate does not verify against the generated one: %w", err)
	}
	return nil
}

// podsByStatus collects, per status code, the distinct pods that answered.
type podsByStatus map[int]map[string]bool

func (p podsByStatus) add(status int, pod string) {
	if p[status] == nil {
		p[status] = map[string]bool{}
	}
	p[status][pod] = true
}

// distinctPods passes when the responses with status code status came from
// exactly pods distinct pods. Upstream ignores responses with other codes.
func (p podsByStatus) distinctPods(status, pods int) error {
	got, ok := p[status]
	if !ok {
		return fmt.Errorf("no responses for status code %d returned (got %s)", status, p)
	}
	if len(got) != pods {
		return fmt.Errorf("expected %d different pods for status code %d but %d answered (%s)", pods, status, len(got), p)
	}
	return nil
}

func (p podsByStatus) String() string {
	var b strings.Builder
	for _, code := range slices.Sorted(maps.Keys(p)) {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d: %d pods", code, len(p[code]))
	}
	return b.String()
}
