package annotation

import (
	"fmt"
	"slices"
	"strings"

	"pier.dev/pier/internal/model"
)

// parseCustomHTTPErrors accepts ingress-nginx's custom-http-errors: a
// comma-separated list of 3-digit statuses, 400-599 (spaces around a
// code are allowed), at most model.MaxCustomErrorCodes distinct ones.
// A code listed twice counts once.
func parseCustomHTTPErrors(v string) ([]int, error) {
	if strings.Trim(v, " ") == "" {
		return nil, fmt.Errorf("custom-http-errors %s: a comma-separated list of statuses 400-599", QuoteForMessage(v))
	}
	var codes []int
	for _, part := range strings.Split(v, ",") {
		c := strings.Trim(part, " ")
		if len(c) != 3 || c[0] < '4' || c[0] > '5' || c[1] < '0' || c[1] > '9' || c[2] < '0' || c[2] > '9' {
			return nil, fmt.Errorf("custom-http-errors %s: %s is not a status 400-599", QuoteForMessage(v), QuoteForMessage(c))
		}
		n := int(c[0]-'0')*100 + int(c[1]-'0')*10 + int(c[2]-'0')
		if !slices.Contains(codes, n) {
			codes = append(codes, n)
		}
		if len(codes) > model.MaxCustomErrorCodes {
			return nil, fmt.Errorf("custom-http-errors %s: more than %d statuses", QuoteForMessage(v), model.MaxCustomErrorCodes)
		}
	}
	slices.Sort(codes)
	return codes, nil
}

// customErrorsDifference is how custom-http-errors differs from
// ingress-nginx.
const customErrorsDifference = "needs the default-backend annotation (pier has no controller-wide default backend; " +
	"without it the annotation is ignored with a warning); the client gets the original status with the error " +
	"backend's body and Content-Type only (ingress-nginx passes the error backend's whole answer, its status included); " +
	"X-Request-ID is the request's own, when it has one; if the error backend cannot answer, the original answer is kept"
