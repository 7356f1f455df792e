package translate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// parsedIngress is one accepted Ingress, validated and resolved, before
// Ingresses are grouped into LoadBalancers.
type parsedIngress struct {
	ing      *networkingv1.Ingress
	source   model.Source
	settings ingressSettings
	routes   []route
	// stripForm: rewrite-target "<path>/$2" with every path
	// "P(/|$)(.*)", routed as Prefix P (regexrewrite.go).
	stripForm bool
	// defaultPool is spec.defaultBackend's pool, or nil.
	defaultPool *model.Pool
	// fallbackPool is the default-backend annotation's pool, or nil.
	fallbackPool *model.Pool
	// extAuthPool is auth-url's pool, or nil.
	extAuthPool *model.Pool
	// passthrough are the hosts of ssl-passthrough, with TCP pools.
	passthrough []passthroughRoute
	pools       map[string]*model.Pool
	certs       []model.Certificate
	// certFields is the spec.tls field of each of certs, for problems.
	certFields []string
}

// route is one host+path of an Ingress, before ordering.
type route struct {
	host      string
	hostMatch model.CompareType // "" matches every host
	path      string
	pathMatch model.CompareType
	poolID    string
	field     string
	// wwwTo, on a route pier added for from-to-www-redirect, is the host
	// the request is redirected to (the Ingress's own).
	wwwTo string
}

// parseIngress validates one Ingress. It returns nil when the Ingress is
// refused; the problems say why.
func parseIngress(ing *networkingv1.Ingress, x *index, opts Options) (*parsedIngress, []model.Problem) {
	p := &parsedIngress{
		ing:    ing,
		source: model.Source{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, UID: validUID(string(ing.UID))},
		pools:  map[string]*model.Pool{},
	}
	var problems []model.Problem
	if size, largest := annotationsSize(ing.Annotations); size > maxAnnotationsSize {
		return nil, append(problems, refusal(ing, "AnnotationsTooLarge", fieldForAnnotation(largest),
			"annotations total %d bytes, over the API server's limit of %d (the largest is %s, %d bytes): refused",
			size, maxAnnotationsSize, annotation.QuoteForMessage(largest), len(ing.Annotations[largest])))
	}
	settings, issues := annotation.Parse(ing.Annotations)
	issues = applyPolicies(issues, ing.Annotations, opts)
	refused := false
	for _, is := range issues {
		field := fieldForAnnotation(is.Key)
		if is.Fatal {
			refused = true
			reason := "InvalidAnnotation"
			switch {
			case is.Snippet:
				reason = "SnippetRefused"
			case is.Protection:
				reason = "ProtectionRefused"
			}
			problems = append(problems, refusal(ing, reason, field, "%s: %s", annotation.QuoteForMessage(is.Key), is.Message))
		} else {
			problems = append(problems, warning(ing, "IgnoredAnnotation", field, "%s: %s", annotation.QuoteForMessage(is.Key), is.Message))
		}
	}
	if refused {
		return nil, problems
	}
	p.settings = ingressSettings{Settings: settings}
	if key, err := p.resolveAuth(x); err != nil {
		return nil, append(problems, refusal(ing, "InvalidAnnotation", fieldForAnnotation(key), "%s: %v", annotation.QuoteForMessage(key), err))
	}
	if key, err := p.resolveCustomHeaders(x); err != nil {
		return nil, append(problems, refusal(ing, "InvalidAnnotation", fieldForAnnotation(key), "%s: %v", annotation.QuoteForMessage(key), err))
	}
	if key, err := p.resolveProxySSL(x, opts, &problems); err != nil {
		return nil, append(problems, refusal(ing, "InvalidAnnotation", fieldForAnnotation(key), "%s: %v", annotation.QuoteForMessage(key), err))
	}

	if err := p.parseDefaultBackend(x, opts, &problems); err != nil {
		return nil, append(problems, refusal(ing, "InvalidIngress", "spec.defaultBackend", "%v", err))
	}
	if err := p.parseRules(x, opts, &problems); err != nil {
		return nil, append(problems, refusal(ing, "InvalidIngress", "spec.rules", "%v", err))
	}
	if err := p.parsePassthrough(x, opts, &problems); err != nil {
		return nil, append(problems, refusal(ing, "InvalidIngress", "spec.rules", "%v", err))
	}
	if err := p.resolveFallback(x, opts, &problems); err != nil {
		key := annotation.KeyOf(ing.Annotations, "default-backend")
		return nil, append(problems, refusal(ing, "InvalidAnnotation", fieldForAnnotation(key), "%s: %v", annotation.QuoteForMessage(key), err))
	}
	p.checkCustomErrors(&problems)
	if err := p.resolveExtAuth(x, opts, &problems); err != nil {
		key := annotation.KeyOf(ing.Annotations, "auth-url")
		return nil, append(problems, refusal(ing, "InvalidAnnotation", fieldForAnnotation(key), "%s: %v", annotation.QuoteForMessage(key), err))
	}
	p.parseTLS(x, opts, &problems)
	return p, problems
}

func (p *parsedIngress) parseDefaultBackend(x *index, opts Options, problems *[]model.Problem) error {
	b := p.ing.Spec.DefaultBackend
	if b == nil {
		return nil
	}
	pool, err := p.backendPool(b, "spec.defaultBackend", x, opts, problems)
	if err != nil {
		return err
	}
	p.defaultPool = pool
	return nil
}

func (p *parsedIngress) backendPool(b *networkingv1.IngressBackend, field string, x *index,
	opts Options, problems *[]model.Problem) (*model.Pool, error) {
	if b.Resource != nil || b.Service == nil {
		return nil, fmt.Errorf("%s: only service backends are supported", field)
	}
	pool, warnings, err := x.poolFor(p.ing, b.Service, field+".service", p.settings, opts)
	if err != nil {
		return nil, err
	}
	*problems = append(*problems, warnings...)
	if existing, ok := p.pools[pool.ID]; ok {
		return existing, nil
	}
	p.pools[pool.ID] = pool
	return pool, nil
}

func (p *parsedIngress) parseRules(x *index, opts Options, problems *[]model.Problem) error {
	paths := 0
	p.checkStripForm()
	for i, rule := range p.ing.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		hostMatch, err := checkHost(rule.Host)
		if err != nil {
			return fmt.Errorf("%s.host: %w", field, err)
		}
		if rule.HTTP == nil {
			continue
		}
		for j, hp := range rule.HTTP.Paths {
			pfield := fmt.Sprintf("%s.http.paths[%d]", field, j)
			if paths++; opts.MaxPathsPerIngress > 0 && paths > opts.MaxPathsPerIngress {
				return fmt.Errorf("more than %d paths (--max-paths-per-ingress)", opts.MaxPathsPerIngress)
			}
			path, pathMatch, err := p.routePath(hp)
			if err != nil {
				return fmt.Errorf("%s: %w", pfield, err)
			}
			// With rewrite-target, ingress-nginx reads the path as a
			// regular expression: without use-regex pier matches it by
			// its pathType, so refuse one that would match otherwise.
			if p.settings.RewriteTarget != "" && pathMatch != model.CompareRegex && !p.stripForm &&
				strings.ContainsAny(hp.Path, annotation.RegexPathChars) {
				return fmt.Errorf("%s.path %s: with rewrite-target, ingress-nginx reads it as a regular expression: "+
					"set use-regex: \"true\" for pier to read it so too", pfield, annotation.QuoteForMessage(hp.Path))
			}
			pool, err := p.backendPool(&hp.Backend, pfield+".backend", x, opts, problems)
			if err != nil {
				return err
			}
			p.routes = append(p.routes, route{
				host: rule.Host, hostMatch: hostMatch,
				path: path, pathMatch: pathMatch,
				poolID: pool.ID, field: pfield,
			})
		}
	}
	return nil
}

// parseTLS resolves spec.tls. A bad Secret does not refuse the Ingress:
// its routes keep serving over HTTP, the hosts get no certificate of
// their own, and a warning says why.
func (p *parsedIngress) parseTLS(x *index, opts Options, problems *[]model.Problem) {
	ing := p.ing
	for i, t := range ing.Spec.TLS {
		field := fmt.Sprintf("spec.tls[%d]", i)
		var hosts []string
		bad := false
		for j, h := range t.Hosts {
			if _, err := checkHost(h); err != nil || h == "" {
				*problems = append(*problems, warning(ing, "InvalidTLS", fmt.Sprintf("%s.hosts[%d]", field, j),
					"TLS entry ignored: invalid host: %v", err))
				bad = true
				break
			}
			hosts = append(hosts, h)
		}
		if bad {
			continue
		}
		if t.SecretName == "" {
			*problems = append(*problems, warning(ing, "InvalidTLS", field+".secretName",
				"TLS entry ignored: no secretName"))
			continue
		}
		if strings.Contains(t.SecretName, "/") {
			*problems = append(*problems, warning(ing, "InvalidTLS", field+".secretName",
				"TLS entry ignored: %s: Secrets of other namespaces cannot be referenced", annotation.QuoteForMessage(t.SecretName)))
			continue
		}
		cert, pair, err := certificate(x.snap.Secret(ing.Namespace, t.SecretName), ing.Namespace, t.SecretName, hosts)
		if err != nil {
			*problems = append(*problems, warning(ing, "InvalidTLS", field+".secretName",
				"TLS entry ignored: secret %s/%s: %v", ing.Namespace, annotation.QuoteForMessage(t.SecretName), err))
			continue
		}
		if !opts.Now.IsZero() && cert.NotAfter.Before(opts.Now) {
			*problems = append(*problems, warning(ing, "ExpiredCertificate", field+".secretName",
				"certificate of secret %s/%s expired at %s", ing.Namespace, t.SecretName, cert.NotAfter.UTC().Format("2006-01-02T15:04:05Z")))
		}
		for j, h := range hosts {
			probe := h
			if rest, wildcard := strings.CutPrefix(h, "*"); wildcard {
				probe = "x" + rest // any one label stands for the wildcard
			}
			if !pair.CoversHost(probe) {
				*problems = append(*problems, warning(ing, "CertificateHostMismatch", fmt.Sprintf("%s.hosts[%d]", field, j),
					"certificate of secret %s/%s does not cover host %s: clients will see a name mismatch", ing.Namespace, t.SecretName, h))
			}
		}
		p.certs = append(p.certs, cert)
		p.certFields = append(p.certFields, field)
	}
}

func certificate(sec *corev1.Secret, namespace, name string, hosts []string) (model.Certificate, *tlscert.Pair, error) {
	if sec == nil {
		return model.Certificate{}, nil, fmt.Errorf("not found")
	}
	if sec.Type != corev1.SecretTypeTLS && sec.Type != corev1.SecretTypeOpaque && sec.Type != "" {
		return model.Certificate{}, nil, fmt.Errorf("type %s is not %s", annotation.QuoteForMessage(string(sec.Type)), corev1.SecretTypeTLS)
	}
	pair, err := tlscert.Parse(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return model.Certificate{}, nil, err
	}
	return model.Certificate{
		ID:        model.ID("cert", namespace, name),
		Namespace: namespace,
		Secret:    name,
		Hosts:     hosts,
		SHA256:    pair.SHA256,
		NotAfter:  pair.NotAfter,
	}, pair, nil
}
