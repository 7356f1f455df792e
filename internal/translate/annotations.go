package translate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// AnnotationPrefix is the prefix of every annotation pier reads.
const AnnotationPrefix = annotation.Prefix

// The annotations pier understands. Each has one typed parser; an invalid
// value refuses the whole Ingress. There are no snippet
// annotations: raw HAProxy text from users is never accepted.
const (
	// AnnotationLoadBalancer names a group: Ingresses with the same value
	// share one LoadBalancer and its VIP (Kuryr's shared L7 router).
	AnnotationLoadBalancer = AnnotationPrefix + "load-balancer"
	// AnnotationExternalIP pins the floating IP.
	AnnotationExternalIP = AnnotationPrefix + "external-ip"
	// AnnotationBalance picks the HAProxy balance algorithm of the pools
	// this Ingress routes to.
	AnnotationBalance = AnnotationPrefix + "balance"
	// AnnotationHealthCheck turns active TCP health checks of members on
	// or off; without it Options.HealthChecks decides.
	AnnotationHealthCheck = AnnotationPrefix + "health-check"
	// AnnotationAccessLog picks the access logging of the Ingress's load
	// balancer: on, off or sample=N (one request in N); unset, the
	// agent's --access-log. In a group the most verbose member decides.
	AnnotationAccessLog = AnnotationPrefix + "access-log"
	// AnnotationAuthURLCASecret names a Secret of the Ingress's namespace
	// whose ca.crt signs the certificate of an https auth-url's Service.
	AnnotationAuthURLCASecret = annotation.AuthURLCASecret
	// AnnotationAuthURLVerify "false" sends an https auth-url's requests
	// without checking the Service's certificate.
	AnnotationAuthURLVerify = AnnotationPrefix + "auth-url-verify"
)

// maxAnnotationsSize is the API server's limit on all annotations of an
// object together (256 KiB). A real cluster never hands pier more; from a
// file, more is refused rather than read.
const maxAnnotationsSize = 256 << 10

// maxAnnotationValue bounds a pier.dev/ value before it is parsed: no
// value of ours needs more, and a parser never sees megabytes.
const maxAnnotationValue = 1024

// maxValueOf is the largest value read under key.
func maxValueOf(key string) int {
	if key == AnnotationRequestHeaders || key == AnnotationResponseHeaders {
		return maxHeaderAnnotation
	}
	return maxAnnotationValue
}

// annotationsSize returns the size of all annotations and the key of the
// largest value (the first in key order among equals, for determinism).
func annotationsSize(ann map[string]string) (int, string) {
	n, largest := 0, ""
	for k, v := range ann {
		n += len(k) + len(v)
		if l := len(ann[largest]); len(v) > l || (len(v) == l && (largest == "" || k < largest)) {
			largest = k
		}
	}
	return n, largest
}

// balanceAlgorithms is the allow-list for AnnotationBalance: HAProxy's
// familiar words, mapped to the model's algorithm names.
var balanceAlgorithms = map[string]model.Algorithm{
	"roundrobin": model.AlgorithmRoundRobin,
	"leastconn":  model.AlgorithmLeastConnections,
	"source":     model.AlgorithmSourceIP,
}

// ingressSettings is the typed form of our annotations.
type ingressSettings struct {
	group       string
	externalIP  string
	balance     model.Algorithm
	healthCheck *bool            // nil: Options.HealthChecks
	accessLog   *model.AccessLog // nil: unset

	// ingress-nginx's annotations (compat.go).
	sslRedirect, forceSSLRedirect            bool
	maxBody                                  int64
	connectTimeout, readTimeout, sendTimeout time.Duration
	allowSources, denySources                []string
	permanentRedirect, temporalRedirect      string
	permanentCode, temporalCode              int
	fromToWWW                                bool
	appRoot, upstreamVhost                   string
	rewriteTarget, forwardedPrefix           string
	useRegex                                 bool
	rewriteTail                              bool // rewrite-target is <path>/$2
	rewriteGroups                            int  // the highest $N of rewrite-target, 0 for none
	cors                                     corsSettings
	affinity                                 affinitySettings
	auth                                     authSettings
	rateLimit                                rateLimitSettings
	serviceUpstream                          bool
	canary                                   canarySettings
	tries                                    int
	backendProtocol                          model.BackendProtocol
	defaultBackend                           string
	customErrors                             []int
	extAuth                                  extAuthSettings
	proxySSL                                 proxySSLSettings
	sslPassthrough                           bool
	customHeaders                            string // custom-headers as written
	requestHeaders, responseHeaders          []model.HeaderOp
}

// annotationIssue is one problem with one annotation.
type annotationIssue struct {
	key, message string
	fatal        bool
	// snippet: the key is a snippet, refused unless snippets are
	// ignored (applyPolicies).
	snippet bool
	// protection: the key asks for a protection pier lacks
	// (protections.go), refused unless protections are ignored.
	protection bool
}

// parseAnnotations reads every pier.dev/ and nginx.ingress.kubernetes.io/
// annotation. Unknown keys in either prefix are reported (a Warning, as a
// typo or a feature pier lacks would otherwise go unnoticed); invalid
// values are fatal. Keys are read in order, so a pier.dev/ key is read
// after its nginx.ingress.kubernetes.io/ twin and wins.
func parseAnnotations(ann map[string]string) (ingressSettings, []annotationIssue) {
	s := ingressSettings{balance: model.AlgorithmRoundRobin, sslRedirect: true,
		permanentCode: 301, temporalCode: 302, extAuth: extAuthSettings{method: "GET"}, cors: defaultCORS(), canary: canarySettings{total: defaultCanaryTotal}}
	var issues []annotationIssue
	keys := make([]string, 0, len(ann))
	for k := range ann {
		if strings.HasPrefix(k, AnnotationPrefix) || strings.HasPrefix(k, NginxPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := ann[k]
		name, compat := compatName(k)
		if !compat && isSnippetKey(k) {
			// Never parsed, so never fatal here, whatever its size: a
			// snippet is refused or ignored by applySnippetPolicy.
			issues = append(issues, annotationIssue{key: k, snippet: true, message: snippetIgnored(k, v)})
			continue
		}
		if strings.HasPrefix(k, NginxPrefix) && !compat {
			if asksProtection(name, v, ann) {
				issues = append(issues, annotationIssue{key: k, protection: true, message: protectionIgnored(name)})
				continue
			}
			issues = append(issues, annotationIssue{key: k, message: unsupportedNginx(k)})
			continue
		}
		if limit := maxValueOf(k); len(v) > limit {
			issues = append(issues, annotationIssue{key: k, fatal: true,
				message: fmt.Sprintf("value of %d bytes, over the limit of %d", len(v), limit)})
			continue
		}
		if compat {
			if err := compatAnnotations[name].parse(&s, v); err != nil {
				issues = append(issues, annotationIssue{key: k, message: err.Error(), fatal: true})
			}
			continue
		}
		var err error
		switch k {
		case AnnotationLoadBalancer:
			s.group, err = parseGroup(v)
		case AnnotationExternalIP:
			s.externalIP, err = parseIP(v)
		case AnnotationBalance:
			s.balance, err = parseAlgorithm(v)
		case AnnotationHealthCheck:
			var on bool
			on, err = parseBool(v)
			s.healthCheck = &on
		case AnnotationAccessLog:
			var a model.AccessLog
			if a, err = model.ParseAccessLog(v); err == nil {
				s.accessLog = &a
			}
		case AnnotationAuthURLCASecret:
			s.extAuth.caSecret, err = parseSecretName("auth-url-ca-secret", v)
		case AnnotationAuthURLVerify:
			var verify bool
			verify, err = parseBool(v)
			s.extAuth.noVerify = !verify
		case AnnotationRequestHeaders:
			s.requestHeaders, err = parseHeaderLines("request-headers", v)
		case AnnotationResponseHeaders:
			s.responseHeaders, err = parseHeaderLines("response-headers", v)
		default:
			msg := "unknown annotation, ignored"
			if strings.HasPrefix(k, AnnotationPrefix+"config-") {
				msg = "snippet annotations are not supported, ignored"
			}
			issues = append(issues, annotationIssue{key: k, message: msg})
			continue
		}
		if err != nil {
			issues = append(issues, annotationIssue{key: k, message: err.Error(), fatal: true})
		}
	}
	issues = append(issues, canaryIssues(s.canary, ann)...)
	issues = append(issues, extAuthIssues(s.extAuth, ann)...)
	issues = append(issues, proxySSLIssues(s, ann)...)
	if _, typed := ann[annotation.KeyOf(ann, "auth-type")]; s.auth.secret != "" && !typed {
		issues = append(issues, annotationIssue{key: annotation.KeyOf(ann, "auth-secret"),
			message: "auth-secret without auth-type basic does nothing, as in ingress-nginx"})
	}
	if s.permanentRedirect != "" && s.temporalRedirect != "" {
		issues = append(issues, annotationIssue{key: NginxPrefix + "permanent-redirect",
			message: "temporal-redirect is also set and wins, as in ingress-nginx"})
	}
	return s, issues
}

// compatName is the name of an ingress-nginx annotation pier implements,
// under either prefix.
func compatName(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, NginxPrefix)
	if !ok {
		name, ok = strings.CutPrefix(key, AnnotationPrefix)
	}
	_, known := compatAnnotations[name]
	return name, ok && known
}

// ValidGroupName checks a load-balancer group name given outside an
// Ingress (--default-load-balancer-group) as the annotation's is checked.
func ValidGroupName(v string) error {
	_, err := parseGroup(v)
	return err
}

func parseGroup(v string) (string, error) {
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return "", fmt.Errorf("invalid group name %s: %s", quoteForMessage(v), strings.Join(errs, "; "))
	}
	return v, nil
}

func parseIP(v string) (string, error) {
	addr, err := encode.IP(v)
	if err != nil {
		return "", err
	}
	if addr.String() != v {
		return "", fmt.Errorf("%s is not in canonical form (%s)", quoteForMessage(v), addr)
	}
	return v, nil
}

func parseAlgorithm(v string) (model.Algorithm, error) {
	val, err := encode.Enum(v, sortedKeys(balanceAlgorithms)...)
	if err != nil {
		return "", err
	}
	return balanceAlgorithms[val.String()], nil
}

func parseBool(v string) (bool, error) { return encode.Bool(v) }

// checks is whether the Ingress's pools check their members: its
// pier.dev/health-check when set, else the operator's default.
func (s ingressSettings) checks(opts Options) bool {
	if s.healthCheck != nil {
		return *s.healthCheck
	}
	return opts.HealthChecks
}
