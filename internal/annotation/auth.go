package annotation

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/htpasswd"
)

// BasicAuth are auth-type: basic and its companions.
type BasicAuth struct {
	Basic      bool   // auth-type: basic
	Secret     string // auth-secret as written: "name" or "namespace/name"
	SecretType string // auth-secret-type; "" is auth-file
	Realm      string
}

// parseAuthType accepts "basic". ingress-nginx's "digest" is refused:
// HAProxy checks Basic credentials only.
func parseAuthType(v string) (bool, error) {
	if v == "digest" {
		return false, errors.New("auth-type digest is not supported (HAProxy checks Basic credentials only): use basic")
	}
	if _, err := encode.Enum(v, "basic"); err != nil {
		return false, fmt.Errorf("auth-type: %w", err)
	}
	return true, nil
}

// parseAuthSecret accepts "name" or "namespace/name" (parseObjectName).
func parseAuthSecret(v string) (string, error) { return parseObjectName("auth-secret", v) }

// parseObjectName accepts the value of an annotation naming a Secret or
// ConfigMap: "name" or "namespace/name", each a DNS-1123 name (object
// names are subdomains). Whether the namespace is the Ingress's is
// checked once the Ingress is known (OwnNamespaceObject).
func parseObjectName(name, v string) (string, error) {
	if err := CheckObjectName(v); err != nil {
		return "", fmt.Errorf("%s %s: %w", name, QuoteForMessage(v), err)
	}
	return v, nil
}

func parseAuthSecretType(v string) (string, error) {
	val, err := encode.Enum(v, htpasswd.TypeFile, htpasswd.TypeMap)
	if err != nil {
		return "", fmt.Errorf("auth-secret-type: %w", err)
	}
	return val.String(), nil
}

func parseAuthRealm(v string) (string, error) {
	r, err := encode.Realm(v)
	if err != nil {
		return "", fmt.Errorf("auth-realm: %w", err)
	}
	return r.String(), nil
}
