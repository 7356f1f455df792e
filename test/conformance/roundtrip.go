package conformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRedirects bounds redirect following; upstream recursed without limit.
const maxRedirects = 10

// maxBody caps how much of a response body is read.
const maxBody = 1 << 20

// capturedRequest is the request as the echo backend saw it (its JSON
// answer). It stays zero when the body is not a JSON object, e.g. a 404 page.
type capturedRequest struct {
	Path    string              `json:"path"`
	Host    string              `json:"host"`
	Method  string              `json:"method"`
	Proto   string              `json:"proto"`
	Headers map[string][]string `json:"headers"`

	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
}

// capturedResponse is what the client saw of the response.
type capturedResponse struct {
	StatusCode int
	Proto      string
	Headers    http.Header
	// PeerCertificates is the chain the server presented on HTTPS, leaf
	// first; nil for plain HTTP.
	PeerCertificates []*x509.Certificate
}

// target is one request as a step describes it. Host is both the Host
// header and the TLS server name; empty means neither is overridden, so
// the address itself ends up in the Host header.
type target struct {
	Method, Scheme, Host, Path string
}

// client sends a step's requests to one Ingress address.
type client struct {
	address             string
	httpPort, httpsPort int
	timeout             time.Duration
}

// buildRequest makes the request for t: the URL is
// scheme://<address>[:port]/<path without its leading slash>, the port
// left out when it is the scheme's default so the Host header of an
// un-overridden request is what it would be against a real cluster.
func (c client) buildRequest(ctx context.Context, t target) (*http.Request, error) {
	var port, defaultPort int
	switch t.Scheme {
	case "http":
		port, defaultPort = c.httpPort, 80
	case "https":
		port, defaultPort = c.httpsPort, 443
	default:
		return nil, fmt.Errorf("unsupported scheme %q in request to %q", t.Scheme, t.Host)
	}
	if c.address == "" {
		return nil, fmt.Errorf("no Ingress address to send the request to: the status step must pass first")
	}
	hostport := c.address
	if port != defaultPort {
		hostport = net.JoinHostPort(c.address, strconv.Itoa(port))
	} else if strings.Contains(c.address, ":") {
		hostport = "[" + c.address + "]"
	}
	url := t.Scheme + "://" + hostport + "/" + strings.TrimPrefix(t.Path, "/")
	req, err := http.NewRequestWithContext(ctx, t.Method, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building request %s %s: %w", t.Method, url, err)
	}
	if t.Host != "" {
		req.Host = t.Host
	}
	return req, nil
}

// transport is a fresh transport for one request, as upstream builds one
// per request: no connection is reused, and on HTTPS the certificate is
// captured rather than verified (the steps check it), with the request host
// as server name.
func (c client) transport(t target, peer *[]*x509.Certificate) *http.Transport {
	tlsConfig := &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // self-signed; verified by the TLS step against the generated certificate
		VerifyConnection: func(cs tls.ConnectionState) error {
			*peer = cs.PeerCertificates
			return nil
		},
	}
	if t.Scheme == "https" && t.Host != "" {
		tlsConfig.ServerName = t.Host
	}
	return &http.Transport{
		DisableCompression: true,
		DisableKeepAlives:  true,
		TLSClientConfig:    tlsConfig,
		// No Proxy: requests go straight to the Ingress address.
	}
}

// roundTrip sends t once (one request per step, no retries) and follows
// redirects itself, sending the follow-up to the same Ingress address with
// the Location's scheme, host name and path, as upstream does.
func (c client) roundTrip(ctx context.Context, t target) (*capturedRequest, *capturedResponse, error) {
	for range maxRedirects {
		req, res, next, err := c.once(ctx, t)
		if err != nil || next == nil {
			return req, res, err
		}
		t = *next
	}
	return nil, nil, fmt.Errorf("more than %d redirects, last to %s://%s%s", maxRedirects, t.Scheme, t.Host, t.Path)
}

// once sends t and returns either the capture or the redirect to follow.
func (c client) once(ctx context.Context, t target) (*capturedRequest, *capturedResponse, *target, error) {
	req, err := c.buildRequest(ctx, t)
	if err != nil {
		return nil, nil, nil, err
	}
	var peer []*x509.Certificate
	tr := c.transport(t, &peer)
	defer tr.CloseIdleConnections()
	hc := &http.Client{
		Transport:     tr,
		Timeout:       c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s (Host %q): %w", t.Method, req.URL, req.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s (Host %q): reading body: %w", t.Method, req.URL, req.Host, err)
	}

	if isRedirect(resp.StatusCode) {
		loc, err := resp.Location()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("redirect %d without a usable Location: %w", resp.StatusCode, err)
		}
		return nil, nil, &target{Method: t.Method, Scheme: loc.Scheme, Host: loc.Hostname(), Path: loc.Path}, nil
	}

	capReq, err := decodeEcho(body)
	if err != nil {
		return nil, nil, nil, err
	}
	return capReq, &capturedResponse{
		StatusCode:       resp.StatusCode,
		Proto:            resp.Proto,
		Headers:          resp.Header,
		PeerCertificates: peer,
	}, nil, nil
}

// decodeEcho reads the echo backend's answer. A body that is not a JSON
// object (an error page) gives an empty capture; a JSON object that does
// not fit is an error.
func decodeEcho(body []byte) (*capturedRequest, error) {
	var probe map[string]any
	if json.Unmarshal(body, &probe) != nil {
		return &capturedRequest{}, nil
	}
	var cr capturedRequest
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, fmt.Errorf("unexpected error reading response: %w", err)
	}
	return &cr, nil
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}
