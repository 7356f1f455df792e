package annotation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// parseDefaultBackendName accepts ingress-nginx's default-backend: the
// name of a Service of the Ingress's own namespace (a DNS-1035 label, as
// a Service name is). "namespace/name" is refused: pier never sends an
// Ingress's requests to another namespace.
func parseDefaultBackendName(v string) (string, error) {
	if strings.Contains(v, "/") {
		return "", fmt.Errorf("default-backend %s: a Service of the Ingress's own namespace, by name only",
			QuoteForMessage(v))
	}
	if errs := validation.IsDNS1035Label(v); len(errs) > 0 {
		return "", fmt.Errorf("default-backend %s: %s", QuoteForMessage(v), strings.Join(errs, "; "))
	}
	return v, nil
}

// defaultBackendDifference is how default-backend differs from
// ingress-nginx.
const defaultBackendDifference = "only while the route's Service has no usable member (no ready endpoint, or all " +
	"failing their health check), and for the statuses custom-http-errors lists; the Service's first port is used"
