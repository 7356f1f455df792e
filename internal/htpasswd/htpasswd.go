// Package htpasswd reads the users of an ingress-nginx basic-auth Secret
// (auth-secret) into a canonical, validated list. Translation reads it
// to accept the Secret and record its digest; the agent reads it again
// from the Secret it fetches (the Secret may have changed since) and
// renders only a list whose digest is the one translation recorded, as
// it does for TLS certificates. It does no I/O.
package htpasswd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"pier.dev/pier/internal/encode"
)

// Secret types, as ingress-nginx's auth-secret-type spells them.
const (
	// TypeFile: the Secret's key "auth" holds htpasswd lines "user:hash".
	TypeFile = "auth-file"
	// TypeMap: each key of the Secret is a user, its value the hash.
	TypeMap = "auth-map"
)

// FileKey is the key of an auth-file Secret.
const FileKey = "auth"

// MaxUsers bounds a list: each user is one line of HAProxy configuration.
const MaxUsers = 1000

// MaxListCost bounds what hashing a whole list costs (encode.CryptCost
// summed), about 0.9 s of a CPU here: HAProxy hashes every user when it
// checks or loads the configuration of a process that other load
// balancers share, so this is what one list adds to each of their
// changes. It admits 4 users at bcrypt cost 12, 512 at cost 5 (htpasswd
// -B's default) or 780 at SHA-crypt's default rounds.
const MaxListCost = 1 << 14

// User is one user with a password hash, both validated: a crypt(3)
// hash (encode.CryptHash), which HAProxy's userlist checks, or, with
// Apr1, Apache's MD5 (encode.Apr1Hash), what htpasswd writes by default,
// which crypt(3) does not know and render checks in Lua.
type User struct {
	Name encode.Value
	Hash encode.Value
	Apr1 bool
}

// FromSecret reads the users of a Secret's data as typ says, sorted by
// name. A user twice, an invalid name or hash, or no user at all is an
// error naming the line or key, never the hash.
func FromSecret(data map[string][]byte, typ string) ([]User, error) {
	switch typ {
	case TypeFile:
		b, ok := data[FileKey]
		if !ok {
			return nil, errors.New("no key \"auth\" (auth-secret-type auth-file wants htpasswd lines under it)")
		}
		return parseFile(b)
	case TypeMap:
		return parseMap(data)
	}
	return nil, fmt.Errorf("unknown secret type %s", encode.Printable(typ))
}

func parseFile(b []byte) ([]User, error) {
	var users []User
	for i, line := range bytes.Split(b, []byte("\n")) {
		s := strings.TrimSuffix(string(line), "\r")
		if strings.TrimSpace(s) == "" || strings.HasPrefix(s, "#") {
			continue
		}
		name, hash, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: not user:hash", i+1)
		}
		u, err := user(name, hash)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		users = append(users, u)
	}
	return finish(users)
}

func parseMap(data map[string][]byte) ([]User, error) {
	var users []User
	for name, hash := range data {
		u, err := user(name, strings.TrimRight(string(hash), "\r\n"))
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", encode.Printable(name), err)
		}
		users = append(users, u)
	}
	return finish(users)
}

func user(name, hash string) (User, error) {
	n, err := encode.UserName(name)
	if err != nil {
		return User{}, err
	}
	if strings.HasPrefix(hash, "$apr1$") {
		h, err := encode.Apr1Hash(hash)
		if err != nil {
			return User{}, fmt.Errorf("user %s: %w", n, err)
		}
		return User{Name: n, Hash: h, Apr1: true}, nil
	}
	h, err := encode.CryptHash(hash)
	if err != nil {
		return User{}, fmt.Errorf("user %s: %w", n, err)
	}
	return User{Name: n, Hash: h}, nil
}

func finish(users []User) ([]User, error) {
	switch {
	case len(users) == 0:
		return nil, errors.New("no users")
	case len(users) > MaxUsers:
		return nil, fmt.Errorf("%d users, the limit is %d", len(users), MaxUsers)
	}
	cost := 0
	for _, u := range users {
		if !u.Apr1 { // HAProxy does not hash these when it loads: they are in no userlist
			cost += encode.CryptCost(u.Hash)
		}
	}
	if cost > MaxListCost {
		return nil, fmt.Errorf("hashing the %d users costs about %d bcrypt rounds, the limit is %d (HAProxy hashes every user on each check and reload of a process other load balancers share): "+
			"fewer users, or cheaper hashes (htpasswd -B -C 5)", len(users), cost, MaxListCost)
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Name.String() < users[j].Name.String() })
	for i := 1; i < len(users); i++ {
		if users[i].Name == users[i-1].Name {
			return nil, fmt.Errorf("user %s appears twice", users[i].Name)
		}
	}
	return users, nil
}

// Digest is the SHA-256 of the canonical list, in hex: what translation
// records and the agent compares.
func Digest(users []User) string {
	h := sha256.New()
	for _, u := range users {
		h.Write([]byte(u.Name.String() + ":" + u.Hash.String() + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}
