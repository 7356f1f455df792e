package annotation

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// The annotations pier understands. Each has one typed parser; an invalid
// value refuses the whole Ingress. There are no snippet
// annotations: raw HAProxy text from users is never accepted.
const (
	// LoadBalancer names a group: Ingresses with the same value
	// share one LoadBalancer and its VIP (Kuryr's shared L7 router).
	LoadBalancer = Prefix + "load-balancer"
	// ExternalIP pins the floating IP.
	ExternalIP = Prefix + "external-ip"
	// Balance picks the HAProxy balance algorithm of the pools
	// this Ingress routes to.
	Balance = Prefix + "balance"
	// HealthCheck turns active TCP health checks of members on
	// or off; without it the operator's default decides.
	HealthCheck = Prefix + "health-check"
	// AccessLog picks the access logging of the Ingress's load
	// balancer: on, off or sample=N (one request in N); unset, the
	// agent's --access-log. In a group the most verbose member decides.
	AccessLog = Prefix + "access-log"
	// AuthURLVerify "false" sends an https auth-url's requests
	// without checking the Service's certificate.
	AuthURLVerify = Prefix + "auth-url-verify"
)

// maxAnnotationValue bounds a pier.dev/ value before it is parsed: no
// value of ours needs more, and a parser never sees megabytes.
const maxAnnotationValue = 1024

// maxValueOf is the largest value read under key.
func maxValueOf(key string) int {
	if key == RequestHeaders || key == ResponseHeaders {
		return maxHeaderAnnotation
	}
	return maxAnnotationValue
}

// balanceAlgorithms is the allow-list for Balance: HAProxy's
// familiar words, mapped to the model's algorithm names.
var balanceAlgorithms = map[string]model.Algorithm{
	"roundrobin": model.AlgorithmRoundRobin,
	"leastconn":  model.AlgorithmLeastConnections,
	"source":     model.AlgorithmSourceIP,
}

// Settings is the typed form of an Ingress's annotations, as Parse
// reads them: every value checked and in the model's terms, the objects
// they name (Secrets, ConfigMaps, Services) by name only, as looking
// them up is translate's. A field an Ingress does not set holds pier's
// default (ingress-nginx's, for its annotations), or its zero value
// when there is none.
type Settings struct {
	Group       string // pier.dev/load-balancer
	ExternalIP  string
	Balance     model.Algorithm
	HealthCheck *bool            // nil: the operator's default
	AccessLog   *model.AccessLog // nil: unset

	// ingress-nginx's annotations (compat.go).
	SSLRedirect, ForceSSLRedirect            bool
	MaxBody                                  int64
	ConnectTimeout, ReadTimeout, SendTimeout time.Duration
	AllowSources, DenySources                []string
	PermanentRedirect, TemporalRedirect      string
	PermanentCode, TemporalCode              int
	FromToWWW                                bool
	AppRoot, UpstreamVhost                   string
	RewriteTarget, ForwardedPrefix           string
	UseRegex                                 bool
	RewriteTail                              bool // rewrite-target is <path>/$2
	RewriteGroups                            int  // the highest $N of rewrite-target, 0 for none
	CORS                                     CORS
	Affinity                                 Affinity
	Auth                                     BasicAuth
	RateLimit                                RateLimit
	ServiceUpstream                          bool
	Canary                                   Canary
	Tries                                    int
	BackendProtocol                          model.BackendProtocol
	DefaultBackend                           string
	CustomErrors                             []int
	ExtAuth                                  ExtAuth
	ProxySSL                                 ProxySSL
	SSLPassthrough                           bool
	CustomHeaders                            string // custom-headers as written
	RequestHeaders, ResponseHeaders          []model.HeaderOp
}

// Issue is one problem with one annotation.
type Issue struct {
	Key, Message string
	Fatal        bool
	// snippet: the key is a snippet, refused unless snippets are
	// ignored (ApplyPolicies).
	Snippet bool
	// protection: the key asks for a protection pier lacks
	// (protections.go), refused unless protections are ignored.
	Protection bool
}

// Parse reads every pier.dev/ and nginx.ingress.kubernetes.io/
// annotation. Unknown keys in either prefix are reported (a Warning, as a
// typo or a feature pier lacks would otherwise go unnoticed); invalid
// values are fatal. Keys are read in order, so a pier.dev/ key is read
// after its nginx.ingress.kubernetes.io/ twin and wins. Parse reads
// nothing but ann: the objects the values name are looked up by
// translate.
func Parse(ann map[string]string) (Settings, []Issue) {
	s := Settings{Balance: model.AlgorithmRoundRobin, SSLRedirect: true,
		PermanentCode: 301, TemporalCode: 302, ExtAuth: ExtAuth{Method: "GET"}, CORS: defaultCORS(), Canary: Canary{Total: defaultCanaryTotal}}
	var issues []Issue
	for _, k := range ourKeys(ann) {
		if is, ok := parseKey(&s, k, ann); ok {
			issues = append(issues, is)
		}
	}
	return s, append(issues, combinationIssues(s, ann)...)
}

// ourKeys are the keys of ann under either prefix, sorted.
func ourKeys(ann map[string]string) []string {
	keys := make([]string, 0, len(ann))
	for k := range ann {
		if strings.HasPrefix(k, Prefix) || strings.HasPrefix(k, NginxPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// parseKey reads annotation k of ann into s, and returns the issue it
// has, if any.
func parseKey(s *Settings, k string, ann map[string]string) (Issue, bool) {
	v := ann[k]
	name, compat := compatName(k)
	if !compat && isSnippetKey(k) {
		// Never parsed, so never fatal here, whatever its size: a
		// snippet is refused or ignored by ApplyPolicies.
		return Issue{Key: k, Snippet: true, Message: snippetIgnored(k, v)}, true
	}
	if strings.HasPrefix(k, NginxPrefix) && !compat {
		if asksProtection(name, v, ann) {
			return Issue{Key: k, Protection: true, Message: protectionIgnored(name)}, true
		}
		return Issue{Key: k, Message: unsupportedNginx(k)}, true
	}
	if limit := maxValueOf(k); len(v) > limit {
		return Issue{Key: k, Fatal: true,
			Message: fmt.Sprintf("value of %d bytes, over the limit of %d", len(v), limit)}, true
	}
	var err error
	if compat {
		err = compatAnnotations[name].parse(s, v)
	} else {
		var known bool
		if known, err = parsePierKey(s, k, v); !known {
			msg := "unknown annotation, ignored"
			if strings.HasPrefix(k, Prefix+"config-") {
				msg = "snippet annotations are not supported, ignored"
			}
			return Issue{Key: k, Message: msg}, true
		}
	}
	if err != nil {
		return Issue{Key: k, Message: err.Error(), Fatal: true}, true
	}
	return Issue{}, false
}

// parsePierKey reads k, an annotation of pier's own, into s; known is
// false for a key pier does not have.
func parsePierKey(s *Settings, k, v string) (known bool, err error) {
	switch k {
	case LoadBalancer:
		s.Group, err = parseGroup(v)
	case ExternalIP:
		s.ExternalIP, err = parseIP(v)
	case Balance:
		s.Balance, err = parseAlgorithm(v)
	case HealthCheck:
		var on bool
		on, err = parseBool(v)
		s.HealthCheck = &on
	case AccessLog:
		var a model.AccessLog
		if a, err = model.ParseAccessLog(v); err == nil {
			s.AccessLog = &a
		}
	case AuthURLCASecret:
		s.ExtAuth.CASecret, err = parseSecretName("auth-url-ca-secret", v)
	case AuthURLVerify:
		var verify bool
		verify, err = parseBool(v)
		s.ExtAuth.NoVerify = !verify
	case RequestHeaders:
		s.RequestHeaders, err = parseHeaderLines("request-headers", v)
	case ResponseHeaders:
		s.ResponseHeaders, err = parseHeaderLines("response-headers", v)
	default:
		return false, nil
	}
	return true, err
}

// combinationIssues are the issues of annotations that are each valid
// but do not go together, once all are read.
func combinationIssues(s Settings, ann map[string]string) []Issue {
	var issues []Issue
	issues = append(issues, canaryIssues(s.Canary, ann)...)
	issues = append(issues, extAuthIssues(s.ExtAuth, ann)...)
	issues = append(issues, proxySSLIssues(s, ann)...)
	if _, typed := ann[KeyOf(ann, "auth-type")]; s.Auth.Secret != "" && !typed {
		issues = append(issues, Issue{Key: KeyOf(ann, "auth-secret"),
			Message: "auth-secret without auth-type basic does nothing, as in ingress-nginx"})
	}
	if s.PermanentRedirect != "" && s.TemporalRedirect != "" {
		issues = append(issues, Issue{Key: NginxPrefix + "permanent-redirect",
			Message: "temporal-redirect is also set and wins, as in ingress-nginx"})
	}
	return issues
}

// compatName is the name of an ingress-nginx annotation pier implements,
// under either prefix.
func compatName(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, NginxPrefix)
	if !ok {
		name, ok = strings.CutPrefix(key, Prefix)
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
		return "", fmt.Errorf("invalid group name %s: %s", QuoteForMessage(v), strings.Join(errs, "; "))
	}
	return v, nil
}

func parseIP(v string) (string, error) {
	addr, err := encode.IP(v)
	if err != nil {
		return "", err
	}
	if addr.String() != v {
		return "", fmt.Errorf("%s is not in canonical form (%s)", QuoteForMessage(v), addr)
	}
	return v, nil
}

func parseAlgorithm(v string) (model.Algorithm, error) {
	val, err := encode.Enum(v, slices.Sorted(maps.Keys(balanceAlgorithms))...)
	if err != nil {
		return "", err
	}
	return balanceAlgorithms[val.String()], nil
}

func parseBool(v string) (bool, error) { return encode.Bool(v) }
