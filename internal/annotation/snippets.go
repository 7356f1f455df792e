package annotation

import "strings"

// isSnippetKey reports whether key, under either prefix, names a snippet.
func isSnippetKey(key string) bool {
	name, ok := strings.CutPrefix(key, NginxPrefix)
	if !ok {
		name, ok = strings.CutPrefix(key, Prefix)
	}
	return ok && strings.Contains(name, "snippet")
}

// snippetAlternatives names, for each snippet annotation of
// ingress-nginx, what to use instead when nothing more specific is known
// from its directives.
var snippetAlternatives = map[string]string{
	"configuration-snippet": "pier.dev/request-headers and pier.dev/response-headers for more_set_headers and proxy_set_header, or the typed annotations of docs/migration.md (redirects, source ranges, body size, timeouts)",
	"server-snippet":        "the typed annotations of docs/migration.md (ssl-redirect, permanent-redirect, source ranges; pier.dev/request-headers and pier.dev/response-headers for headers)",
	"auth-snippet":          "auth-url with auth-response-headers (docs/migration.md, External auth)",
	"stream-snippet":        "a Service of type LoadBalancer (pier's native provider) for TCP/UDP",
	"modsecurity-snippet":   "a WAF in front of pier; pier has no ModSecurity",
}

// genericSnippetAlternative is the advice for a snippet key not listed
// above.
const genericSnippetAlternative = "the typed annotations of docs/migration.md"

// denyPath is how a rule that closes one path is written without a
// snippet: an Ingress of its own for the path that every client is
// denied (403).
const denyPath = "an Ingress of its own for it with denylist-source-range 0.0.0.0/0,::/0 (403 for every client)"

// directiveAlternatives maps the nginx directives found in snippets to
// pier's typed equivalent (and the Gateway API filter, where there is
// one). Only these names, never the snippet's text, are repeated in a
// message.
var directiveAlternatives = map[string]string{
	"more_set_headers":         "pier.dev/response-headers (Gateway API: ResponseHeaderModifier)",
	"more_clear_headers":       "pier.dev/response-headers with -Name lines (Gateway API: ResponseHeaderModifier remove)",
	"add_header":               "pier.dev/response-headers (Gateway API: ResponseHeaderModifier)",
	"proxy_hide_header":        "pier.dev/response-headers with -Name lines",
	"expires":                  "pier.dev/response-headers (Cache-Control)",
	"proxy_set_header":         "pier.dev/request-headers (Gateway API: RequestHeaderModifier)",
	"more_set_input_headers":   "pier.dev/request-headers (Gateway API: RequestHeaderModifier)",
	"more_clear_input_headers": "pier.dev/request-headers with -Name lines",
	"deny":                     "denylist-source-range or whitelist-source-range, or for one path " + denyPath,
	"allow":                    "whitelist-source-range",
	"return":                   "permanent-redirect or temporal-redirect (Gateway API: RequestRedirect), or to refuse one path " + denyPath,
	"rewrite":                  "rewrite-target (Gateway API: URLRewrite)",
	"auth_basic":               "auth-type basic with auth-secret",
	"auth_basic_user_file":     "auth-type basic with auth-secret",
	"auth_request":             "auth-url",
	"client_max_body_size":     "proxy-body-size",
	"proxy_read_timeout":       "proxy-read-timeout",
	"proxy_send_timeout":       "proxy-send-timeout",
	"proxy_connect_timeout":    "proxy-connect-timeout",
	"limit_req":                "limit-rps or limit-rpm",
	"limit_conn":               "limit-connections",
	"server_name":              "one more host in spec.rules",
	"grpc_pass":                "backend-protocol GRPC",
	"error_page":               "custom-http-errors with default-backend",
	"proxy_intercept_errors":   "custom-http-errors with default-backend",
	"real_ip_header":           "pier's --trusted-proxies",
	"set_real_ip_from":         "pier's --trusted-proxies",
	"modsecurity":              "a WAF in front of pier; pier has no ModSecurity",
	"modsecurity_rules":        "a WAF in front of pier; pier has no ModSecurity",
	"secrule":                  "a WAF in front of pier; pier has no ModSecurity",
	"secruleengine":            "a WAF in front of pier; pier has no ModSecurity",
	"gzip":                     "compression in the backend (pier does not compress)",
}

// maxAdvice bounds the per-directive advice of one message, so that a
// problem stays short enough for an Event (about 500 bytes in all).
const maxAdvice = 280

// snippetAdvice is what to use instead of the snippet key = value: one
// hint per known directive it holds, in the order they appear, else the
// key's general alternative.
func snippetAdvice(key, value string) string {
	var hints []string
	used := 0
	seen := map[string]bool{}
	for _, stmt := range strings.FieldsFunc(value, func(r rune) bool { return r == ';' || r == '{' || r == '}' || r == '\n' }) {
		fields := strings.Fields(stmt)
		if len(fields) == 0 {
			continue
		}
		word := strings.ToLower(strings.Trim(fields[0], `"'`))
		alt, ok := directiveAlternatives[word]
		if !ok || seen[alt] {
			continue
		}
		seen[alt] = true
		hint := "for " + word + " use " + alt
		if used+len(hint) > maxAdvice && len(hints) > 0 {
			hints = append(hints, "…")
			break
		}
		hints, used = append(hints, hint), used+len(hint)+2
	}
	if len(hints) > 0 {
		return strings.Join(hints, "; ")
	}
	name := key[strings.LastIndexByte(key, '/')+1:]
	if alt, ok := snippetAlternatives[name]; ok {
		return "use " + alt
	}
	return "use " + genericSnippetAlternative
}

// snippetIgnored is the Warning for a snippet served without it.
func snippetIgnored(key, value string) string {
	return "snippet annotations are not supported (no raw configuration is accepted), ignored (--ignore-snippets): " +
		snippetAdvice(key, value)
}

// snippetRefused is the refusal for a snippet.
func snippetRefused(key, value string) string {
	return "snippets are refused (pier renders no raw configuration; served without it, what the snippet does would be lost): " +
		snippetAdvice(key, value) + "; --ignore-snippets serves the Ingress without it"
}

// Snippet annotations (configuration-snippet, server-snippet,
// auth-snippet, …) hold raw nginx configuration. pier never renders user
// text, so it cannot do what a snippet does; and serving the Ingress
// without it would open what its author closed: a "deny all" on a path,
// an auth check, a security header. So an Ingress with a snippet is
// refused, as ingress-nginx refuses it when snippets are disabled
// (allow-snippet-annotations false), with the typed alternative.
// Policy.IgnoreSnippets (--ignore-snippets) serves it with the snippet
// ignored and a Warning instead, for a migration that has checked what
// its snippets did.

// Policy is what the operator allows of the annotations Parse cannot
// serve as written.
type Policy struct {
	// IgnoreSnippets serves an Ingress with snippets, ignored, instead
	// of refusing it (--ignore-snippets).
	IgnoreSnippets bool
	// IgnoreProtections serves an Ingress asking for a protection pier
	// lacks, without it, instead of refusing it
	// (--ignore-protection-annotations).
	IgnoreProtections bool
}

// ApplyPolicies makes the snippet issues of ann fatal unless
// IgnoreSnippets, and the protection issues unless IgnoreProtections
// (protections.go), with the message that says so.
func ApplyPolicies(issues []Issue, ann map[string]string, opts Policy) []Issue {
	for i := range issues {
		is := &issues[i]
		name := is.Key[strings.LastIndexByte(is.Key, '/')+1:]
		switch {
		case is.Snippet && opts.IgnoreSnippets:
			is.Message = snippetIgnored(is.Key, ann[is.Key])
		case is.Snippet:
			is.Fatal, is.Message = true, snippetRefused(is.Key, ann[is.Key])
		case is.Protection && opts.IgnoreProtections:
			is.Message = protectionIgnored(name)
		case is.Protection:
			is.Fatal, is.Message = true, protectionRefused(name)
		}
	}
	return issues
}
