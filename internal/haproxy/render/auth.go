package render

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
)

// UserLookup returns the users of a policy's basic auth: the agent reads
// the Secret it names (package htpasswd) and returns them only when
// their digest is a.SHA256, as for certificates. Render checks the
// digest again.
type UserLookup func(a model.BasicAuth) ([]htpasswd.User, error)

// authProfile is a policy's model.BasicAuth, validated again.
type authProfile struct {
	realm encode.Word
	list  encode.Word // the userlist's name
}

var authTypes = []string{htpasswd.TypeFile, htpasswd.TypeMap}

func (u *sections) authProfile(a *model.BasicAuth) (*authProfile, error) {
	if a == nil {
		return nil, nil
	}
	realm, err := encode.Realm(a.Realm)
	if err != nil {
		return nil, fmt.Errorf("basic auth: %w", err)
	}
	if !slices.Contains(authTypes, a.Type) {
		return nil, fmt.Errorf("basic auth: secret type %s", encode.Printable(a.Type))
	}
	if len(a.SHA256) != 64 || encode.ID("", a.SHA256).Err() != nil {
		return nil, errors.New("basic auth: digest is not 64 hex digits")
	}
	id := model.ID("userlist", a.Namespace, a.Secret, a.Type, a.SHA256)
	if _, done := u.byID[id]; !done {
		users, err := u.users(*a)
		if err != nil {
			return nil, fmt.Errorf("basic auth %s/%s: %w", encode.Printable(a.Namespace), encode.Printable(a.Secret), err)
		}
		u.byID[id] = users
	}
	return &authProfile{realm: realm.Word(), list: userlistName(u.uuid, id)}, nil
}

// users looks the users up. Without a lookup (the web view, which shows
// no password hashes) the userlist is empty: HAProxy then refuses every
// request of the route with 401, never serves it unchecked.
func (u *sections) users(a model.BasicAuth) ([]htpasswd.User, error) {
	if u.lookup == nil {
		return []htpasswd.User{}, nil
	}
	users, err := u.lookup(a)
	if err != nil {
		return nil, err
	}
	if len(users) == 0 || len(users) > htpasswd.MaxUsers {
		return nil, fmt.Errorf("%d users, want 1-%d", len(users), htpasswd.MaxUsers)
	}
	if htpasswd.Digest(users) != a.SHA256 {
		return nil, errors.New("users changed since translation")
	}
	return users, nil
}

// userlistName is ul_<lb uuid>_<id>: userlists are process-wide names.
func userlistName(uuid, id string) encode.Word {
	return encode.Concat(encode.ID("ul_", uuid), encode.Lit("_"), encode.ID("", id))
}

// writeUserlists renders each userlist, sorted by id. Names and hashes
// are encode.Values (UserName, CryptHash), written single-quoted.
func writeUserlists(c *encode.Config, u *sections) {
	ids := make([]string, 0, len(u.byID))
	for id := range u.byID {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmp.Compare[string])
	for _, id := range ids {
		c.Blank()
		c.Section(encode.Lit("userlist"), userlistName(u.uuid, id))
		for _, user := range u.byID[id] {
			c.Line(encode.Lit("user"), user.Name.Word(), encode.Lit("password"), user.Hash.Word())
		}
	}
}

// writeAuth answers 401 with WWW-Authenticate: Basic realm="<realm>" to a
// request of the profile without the credentials of one of its users.
func writeAuth(c *encode.Config, name encode.Word, a *authProfile) {
	c.Line(httpRequest, encode.Lit("auth"), encode.Lit("realm"), a.realm, ifWord, name,
		encode.Lit("!{"), encode.Concat(encode.Lit("http_auth("), a.list, encode.Lit(")")), closeBrace)
}
