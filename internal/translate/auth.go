package translate

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
)

// defaultRealm is sent when auth-realm is not set: HAProxy would
// otherwise name the frontend, one of pier's internal names.
const defaultRealm = "Authentication Required"

// authSettings are auth-type: basic and its companions.
type authSettings struct {
	basic      bool   // auth-type: basic
	secret     string // auth-secret as written: "name" or "namespace/name"
	secretType string // auth-secret-type; "" is auth-file
	realm      string
	// resolved is the policy's BasicAuth once the Secret is read.
	resolved *model.BasicAuth
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
// checked once the Ingress is known (annotation.OwnNamespaceObject).
func parseObjectName(name, v string) (string, error) {
	if err := annotation.CheckObjectName(v); err != nil {
		return "", fmt.Errorf("%s %s: %w", name, quoteForMessage(v), err)
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

// resolveAuth reads the Secret of auth-type: basic from the snapshot
// and records its digest; the agent renders the users it reads itself
// only while their digest is this one. It returns the annotation key to
// blame and why, or "" when the Ingress may be served.
func (p *parsedIngress) resolveAuth(x *index) (string, error) {
	a := &p.settings.auth
	ann := p.ing.Annotations
	if !a.basic {
		return "", nil
	}
	key := annotation.KeyOf(ann, "auth-secret")
	if a.secret == "" {
		return annotation.KeyOf(ann, "auth-type"), errors.New("auth-type basic needs auth-secret, the Secret holding the users")
	}
	ns, name, ok := annotation.AuthSecret(p.ing)
	if !ok {
		return key, fmt.Errorf("auth-secret %s: Secrets of other namespaces cannot be referenced", quoteForMessage(a.secret))
	}
	typ := a.secretType
	if typ == "" {
		typ = htpasswd.TypeFile
	}
	sec := x.snap.Secret(ns, name)
	if sec == nil {
		return key, fmt.Errorf("secret %s/%s not found", ns, name)
	}
	users, err := htpasswd.FromSecret(sec.Data, typ)
	if err != nil {
		return key, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	realm := a.realm
	if realm == "" {
		realm = defaultRealm
	}
	a.resolved = &model.BasicAuth{Realm: realm, Namespace: ns, Secret: name, Type: typ, SHA256: htpasswd.Digest(users)}
	return "", nil
}

// model is the policy's BasicAuth (a copy), nil without auth-type basic.
func (a authSettings) model() *model.BasicAuth {
	if a.resolved == nil {
		return nil
	}
	c := *a.resolved
	return &c
}
