package annotation

import (
	"fmt"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// backendProtocols maps ingress-nginx's backend-protocol values (which
// it reads in any case) to the model's. HTTP is the default.
var backendProtocols = map[string]model.BackendProtocol{
	"HTTP": "", "HTTPS": model.BackendHTTPS, "GRPC": model.BackendGRPC, "GRPCS": model.BackendGRPCS,
}

// refusedProtocols are ingress-nginx's other values, with why pier
// refuses them rather than send the members a protocol they do not speak.
var refusedProtocols = map[string]string{
	"AJP":       "HAProxy has no AJP client: expose the application's HTTP connector instead",
	"FCGI":      "FastCGI is not supported: put an HTTP server (php-fpm behind nginx or caddy) in the Pod",
	"AUTO_HTTP": "AUTO_HTTP is not supported: set HTTP or HTTPS",
}

// parseBackendProtocol accepts HTTP, HTTPS, GRPC and GRPCS, in upper or
// lower case as ingress-nginx does (not mixed: an allow-list, not a
// case fold of anything).
func parseBackendProtocol(v string) (model.BackendProtocol, error) {
	upper := strings.ToUpper(v)
	if why, ok := refusedProtocols[upper]; ok && (v == upper || v == strings.ToLower(v)) {
		return "", fmt.Errorf("backend-protocol %s: %s", QuoteForMessage(v), why)
	}
	val, err := encode.Enum(v, "HTTP", "HTTPS", "GRPC", "GRPCS", "http", "https", "grpc", "grpcs")
	if err != nil {
		return "", fmt.Errorf("backend-protocol: %w", err)
	}
	return backendProtocols[strings.ToUpper(val.String())], nil
}
