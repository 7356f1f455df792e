package translate

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
)

// defaultRealm is sent when auth-realm is not set: HAProxy would
// otherwise name the frontend, one of pier's internal names.
const defaultRealm = "Authentication Required"

// resolveAuth reads the Secret of auth-type: basic from the snapshot
// and records its digest; the agent renders the users it reads itself
// only while their digest is this one. It returns the annotation key to
// blame and why, or "" when the Ingress may be served.
func (p *parsedIngress) resolveAuth(x *index) (string, error) {
	a := &p.settings.Auth
	ann := p.ing.Annotations
	if !a.Basic {
		return "", nil
	}
	key := annotation.KeyOf(ann, "auth-secret")
	if a.Secret == "" {
		return annotation.KeyOf(ann, "auth-type"), errors.New("auth-type basic needs auth-secret, the Secret holding the users")
	}
	ns, name, ok := annotation.AuthSecret(p.ing)
	if !ok {
		return key, fmt.Errorf("auth-secret %s: Secrets of other namespaces cannot be referenced", annotation.QuoteForMessage(a.Secret))
	}
	typ := a.SecretType
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
	realm := a.Realm
	if realm == "" {
		realm = defaultRealm
	}
	p.settings.basicAuth = &model.BasicAuth{Realm: realm, Namespace: ns, Secret: name, Type: typ, SHA256: htpasswd.Digest(users)}
	return "", nil
}

// model is the policy's BasicAuth (a copy), nil without auth-type basic.
func (s ingressSettings) basicAuthModel() *model.BasicAuth {
	if s.basicAuth == nil {
		return nil
	}
	c := *s.basicAuth
	return &c
}
