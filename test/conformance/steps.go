package conformance

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"time"

	"github.com/cucumber/godog"
	networkingv1 "k8s.io/api/networking/v1"
)

// Options are the timings of a run. Intervals are not semantics; the
// timeouts and the settle time after scaling are, and default as noted.
type Options struct {
	// StatusTimeout bounds the wait for an Ingress address.
	StatusTimeout time.Duration
	// AbsentStatusTimeout is how long an Ingress of another class must
	// keep an empty status (upstream waits its full status timeout).
	AbsentStatusTimeout time.Duration
	// PollInterval is the status polling interval (upstream: 5 s).
	PollInterval time.Duration
	// ScaleSettle is the sleep after a backend is scaled and its
	// endpoints are ready (upstream: 60 s).
	ScaleSettle time.Duration
	// RequestTimeout bounds each request (upstream: 10 s).
	RequestTimeout time.Duration
	// StopOnFailure ends the run at the first failed scenario.
	StopOnFailure bool
	// Logf reports what is not a step result (cleanup errors); nil drops it.
	Logf func(format string, args ...any)
}

// DefaultOptions are the timings for the files cluster.
func DefaultOptions() Options {
	return Options{
		StatusTimeout:       60 * time.Second,
		AbsentStatusTimeout: 10 * time.Second,
		PollInterval:        time.Second,
		ScaleSettle:         60 * time.Second,
		RequestTimeout:      10 * time.Second,
	}
}

// scenario is the state of one scenario; godog calls the initializer once
// per scenario, so nothing is shared between scenarios.
type scenario struct {
	cluster Cluster
	opts    Options

	namespace   string
	ingressName string
	address     string
	// roots holds the certificates this scenario generated.
	roots *x509.CertPool

	last exchange
	pods podsByStatus
}

// InitializeScenario registers every step of the five conformance features
// for one scenario. The step texts are shared across features and mean the
// same everywhere, so one set serves them all.
func InitializeScenario(sc *godog.ScenarioContext, cluster Cluster, opts Options) {
	s := &scenario{cluster: cluster, opts: opts, pods: podsByStatus{}}

	// Setup.
	sc.Step(`^a new random namespace$`, s.aNewRandomNamespace)
	sc.Step(`^a self-signed TLS secret named "([^"]*)" for the "([^"]*)" hostname$`, s.aSelfSignedTLSSecret)
	sc.Step(`^an Ingress resource named "([^"]*)" with this spec:$`, s.anIngressResourceNamedWithThisSpec)
	sc.Step(`^an Ingress resource$`, s.anIngressResource)
	sc.Step(`^an Ingress resource in a new random namespace$`, s.anIngressResourceInANewRandomNamespace)
	sc.Step(`^The Ingress status shows the IP address or FQDN where it is exposed$`, s.theIngressStatusShowsAnAddress)
	sc.Step(`^The Ingress status should not contain the IP address or FQDN$`, s.theIngressStatusShouldNotContainAnAddress)
	sc.Step(`^The backend deployment "([^"]*)" for the ingress resource is scaled to (\d+)$`, s.theBackendIsScaledTo)

	// Requests.
	sc.Step(`^I send a "([^"]*)" request to http:\/\/"([^"]*)"\/"([^"]*)"$`, s.iSendARequestToHostAndPath)
	sc.Step(`^I send a "([^"]*)" request to "([^"]*)"$`, s.iSendARequestTo)
	sc.Step(`^I send (\d+) requests to "([^"]*)"$`, s.iSendRequestsTo)

	// Checks.
	sc.Step(`^the secure connection must verify the "([^"]*)" hostname$`, s.theSecureConnectionMustVerify)
	sc.Step(`^the response status-code must be (\d+)$`, s.theResponseStatusCodeMustBe)
	sc.Step(`^the response must be served by the "([^"]*)" service$`, s.theResponseMustBeServedBy)
	sc.Step(`^the response proto must be "([^"]*)"$`, s.theResponseProtoMustBe)
	sc.Step(`^the response headers must contain <key> with matching <value>$`, s.theResponseHeadersMustContain)
	sc.Step(`^the request method must be "([^"]*)"$`, s.theRequestMethodMustBe)
	sc.Step(`^the request path must be "([^"]*)"$`, s.theRequestPathMustBe)
	sc.Step(`^the request proto must be "([^"]*)"$`, s.theRequestProtoMustBe)
	sc.Step(`^the request host must be "([^"]*)"$`, s.theRequestHostMustBe)
	sc.Step(`^the request headers must contain <key> with matching <value>$`, s.theRequestHeadersMustContain)
	sc.Step(`^all the responses status-code must be (\d+) and the response body should contain the IP address of (\d+) different Kubernetes pods$`,
		s.allResponsesCameFromDifferentPods)

	sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
		s.cleanup(ctx)
		return ctx, nil
	})
}

func (s *scenario) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

func (s *scenario) cleanup(ctx context.Context) {
	if s.namespace == "" {
		return
	}
	if err := s.cluster.DeleteNamespace(context.WithoutCancel(ctx), s.namespace); err != nil {
		s.logf("deleting namespace %s: %v", s.namespace, err)
	}
}

func (s *scenario) aNewRandomNamespace(ctx context.Context) error {
	ns, err := s.cluster.NewNamespace(ctx)
	if err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}
	s.namespace = ns
	return nil
}

func (s *scenario) aSelfSignedTLSSecret(ctx context.Context, name, host string) error {
	cert, certPEM, keyPEM, err := selfSignedCert([]string{host})
	if err != nil {
		return err
	}
	if err := s.cluster.CreateTLSSecret(ctx, s.namespace, name, certPEM, keyPEM); err != nil {
		return fmt.Errorf("creating TLS secret %s/%s: %w", s.namespace, name, err)
	}
	if s.roots == nil {
		s.roots = x509.NewCertPool()
	}
	s.roots.AddCert(cert)
	return nil
}

func (s *scenario) anIngressResourceNamedWithThisSpec(ctx context.Context, name string, spec *godog.DocString) error {
	ing, err := ingressFromSpec(name, s.namespace, spec.Content)
	if err != nil {
		return err
	}
	return s.createIngress(ctx, ing)
}

func (s *scenario) anIngressResource(ctx context.Context, manifest *godog.DocString) error {
	ing, err := ingressFromManifest(s.namespace, manifest.Content)
	if err != nil {
		return err
	}
	return s.createIngress(ctx, ing)
}

func (s *scenario) anIngressResourceInANewRandomNamespace(ctx context.Context, manifest *godog.DocString) error {
	if err := s.aNewRandomNamespace(ctx); err != nil {
		return err
	}
	return s.anIngressResource(ctx, manifest)
}

// createIngress makes one single-replica backend per Service the Ingress
// names, then the Ingress, as upstream does.
func (s *scenario) createIngress(ctx context.Context, ing *networkingv1.Ingress) error {
	for _, b := range backendServices(ing) {
		if err := s.cluster.CreateBackend(ctx, s.namespace, ing.Name, b.Service, b.Port, 1); err != nil {
			return fmt.Errorf("creating backend %s/%s: %w", s.namespace, b.Service, err)
		}
	}
	if err := s.cluster.CreateIngress(ctx, s.namespace, ing); err != nil {
		return fmt.Errorf("creating Ingress %s/%s: %w", s.namespace, ing.Name, err)
	}
	s.ingressName = ing.Name
	return nil
}

func (s *scenario) theIngressStatusShowsAnAddress(ctx context.Context) error {
	addr, err := waitForAddress(ctx, s.cluster, s.namespace, s.ingressName, s.opts.PollInterval, s.opts.StatusTimeout)
	if err != nil {
		return err
	}
	s.address = addr
	return nil
}

func (s *scenario) theIngressStatusShouldNotContainAnAddress(ctx context.Context) error {
	return waitAddressAbsent(ctx, s.cluster, s.namespace, s.ingressName, s.opts.PollInterval, s.opts.AbsentStatusTimeout)
}

func (s *scenario) theBackendIsScaledTo(ctx context.Context, service string, replicas int) error {
	if err := s.cluster.ScaleBackend(ctx, s.namespace, s.ingressName, service, replicas); err != nil {
		return fmt.Errorf("scaling backend %s/%s to %d: %w", s.namespace, service, replicas, err)
	}
	return sleep(ctx, s.opts.ScaleSettle)
}

func (s *scenario) client() client {
	httpPort, httpsPort := s.cluster.Ports()
	return client{address: s.address, httpPort: httpPort, httpsPort: httpsPort, timeout: s.opts.RequestTimeout}
}

func (s *scenario) send(ctx context.Context, t target) error {
	req, res, err := s.client().roundTrip(ctx, t)
	if err != nil {
		return err
	}
	s.last = exchange{req: req, res: res}
	return nil
}

func (s *scenario) iSendARequestToHostAndPath(ctx context.Context, method, host, path string) error {
	return s.send(ctx, target{Method: method, Scheme: "http", Host: host, Path: path})
}

func (s *scenario) iSendARequestTo(ctx context.Context, method, rawURL string) error {
	t, err := parseTarget(method, rawURL)
	if err != nil {
		return err
	}
	return s.send(ctx, t)
}

// iSendRequestsTo sends n GETs one after the other and records which pod
// answered each, by status code. Any failed request fails the step.
func (s *scenario) iSendRequestsTo(ctx context.Context, n int, rawURL string) error {
	t, err := parseTarget("GET", rawURL)
	if err != nil {
		return err
	}
	c := s.client()
	for i := 1; i <= n; i++ {
		req, res, err := c.roundTrip(ctx, t)
		if err != nil {
			return fmt.Errorf("request %d of %d: %w", i, n, err)
		}
		s.pods.add(res.StatusCode, req.Pod)
	}
	return nil
}

func (s *scenario) theSecureConnectionMustVerify(hostname string) error {
	return s.last.secureConnection(hostname, s.roots)
}

func (s *scenario) theResponseStatusCodeMustBe(code int) error     { return s.last.statusCode(code) }
func (s *scenario) theResponseMustBeServedBy(service string) error { return s.last.servedBy(service) }
func (s *scenario) theResponseProtoMustBe(proto string) error      { return s.last.responseProto(proto) }
func (s *scenario) theRequestMethodMustBe(method string) error     { return s.last.method(method) }
func (s *scenario) theRequestPathMustBe(path string) error         { return s.last.requestPath(path) }
func (s *scenario) theRequestProtoMustBe(proto string) error       { return s.last.requestProto(proto) }
func (s *scenario) theRequestHostMustBe(host string) error         { return s.last.requestHost(host) }

func (s *scenario) theResponseHeadersMustContain(t *godog.Table) error {
	return headerTable(t, s.last.responseHeader)
}

func (s *scenario) theRequestHeadersMustContain(t *godog.Table) error {
	return headerTable(t, s.last.requestHeader)
}

func (s *scenario) allResponsesCameFromDifferentPods(code, pods int) error {
	return s.pods.distinctPods(code, pods)
}

// parseTarget reads a step URL such as "http://foo.bar.com/path": its host
// (port included, if any) is the Host header and server name.
func parseTarget(method, rawURL string) (target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return target{}, fmt.Errorf("parsing request URL %q: %w", rawURL, err)
	}
	return target{Method: method, Scheme: u.Scheme, Host: u.Host, Path: u.Path}, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
