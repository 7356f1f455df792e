package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
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
	id    string      // the list's id in sections
	s     *sections
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
	return &authProfile{realm: realm.Word(), list: userlistName(u.uuid, id), id: id, s: u}, nil
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
// are encode.Values (UserName, CryptHash), written single-quoted. The
// $apr1$ users are in no userlist (crypt(3) would refuse them all): they
// are in the list's apr1 map (authMapFiles), checked in Lua.
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
			if !user.Apr1 {
				c.Line(encode.Lit("user"), user.Name.Word(), encode.Lit("password"), user.Hash.Word())
			}
		}
	}
}

// writeAuth answers 401 with WWW-Authenticate: Basic realm="<realm>" to a
// request of the profile without the credentials of one of its users.
// With $apr1$ users, a request the userlist does not let through takes
// its user's stored hash from the list's map into txn.pier_apr1 (no
// sample, so no variable, for a user not in it), the Lua action checks
// the password against it and sets txn.pier_apr1_ok, and only then is
// the 401 decided.
func writeAuth(c *encode.Config, name encode.Word, a *authProfile) {
	notInList := []encode.Word{encode.Lit("!{"), encode.Concat(encode.Lit("http_auth("), a.list, encode.Lit(")")), closeBrace}
	if m, ok := a.s.apr1Maps[a.id]; ok {
		c.Line(append([]encode.Word{httpRequest, encode.Concat(encode.Lit("set-var("), apr1HashVar, encode.Lit(")")),
			encode.Concat(encode.Lit("http_auth_user,map_str("), m, encode.Lit(")")), ifWord, name}, notInList...)...)
		c.Line(httpRequest, apr1Action(a.s.uuid), ifWord, name, openBrace, encode.Concat(encode.Lit("var("), apr1HashVar, encode.Lit(")")),
			encode.Lit("-m"), encode.Lit("found"), closeBrace)
		c.Line(append(append([]encode.Word{httpRequest, encode.Lit("auth"), encode.Lit("realm"), a.realm, ifWord, name}, notInList...),
			encode.Lit("!{"), encode.Concat(encode.Lit("var("), apr1OKVar, encode.Lit(")")), encode.Lit("-m"), encode.Lit("bool"), closeBrace)...)
		return
	}
	c.Line(append([]encode.Word{httpRequest, encode.Lit("auth"), encode.Lit("realm"), a.realm, ifWord, name}, notInList...)...)
}

// The variables of the $apr1$ check (apr1.lua reads and sets them).
var (
	apr1HashVar = encode.Lit("txn.pier_apr1")
	apr1OKVar   = encode.Lit("txn.pier_apr1_ok")
)

// apr1Action is the load balancer's Lua action that checks $apr1$
// passwords (apr1.lua), lua.pier_apr1_<uuid>.
func apr1Action(uuid string) encode.Word { return encode.ID("lua.pier_apr1_", uuid) }

// authMapFiles writes, for each userlist with $apr1$ users, the map file
// "user hash" its Lua check reads the stored hash from, named by its
// digest (a new list never overwrites one the running configuration
// reads), and records its path for writeAuth. Names and hashes are
// UserName and Apr1Hash values: no space, quote or '#', one map word each.
func authMapFiles(u *sections, at layout.LB) ([]MapFile, error) {
	var out []MapFile
	ids := make([]string, 0, len(u.byID))
	for id := range u.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		var b []byte
		for _, user := range u.byID[id] {
			if !user.Apr1 {
				continue
			}
			line, err := encode.MapLine(user.Name.Word(), user.Hash.Word())
			if err != nil {
				return nil, fmt.Errorf("basic auth: %w", err)
			}
			b = append(b, line...)
		}
		if b == nil {
			continue
		}
		sum := sha256.Sum256(b)
		path, err := at.AuthMap(hex.EncodeToString(sum[:]))
		if err != nil {
			return nil, err
		}
		u.apr1Maps[id] = encode.FilePath(path)
		out = append(out, MapFile{Path: path, Data: b})
	}
	return out, nil
}
