package htpasswd

import (
	"strconv"
	"strings"
	"testing"
)

const (
	bcrypt = "$2y$05$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	sha512 = "$6$Ea1yNgy2jUg9amIr$h.OMJyaKB7QcQCFGkA52leL2i2SrycZ0WwA8tptjw7w5OOY81RkZMwE69n.wQh2Cs5nzhSPoquUgfXsgcnQN1/"
)

func TestFromSecret(t *testing.T) {
	file, err := FromSecret(map[string][]byte{"auth": []byte("# team\r\nbob:" + sha512 + "\r\n\nalice:" + bcrypt + "\n")}, TypeFile)
	if err != nil || len(file) != 2 || file[0].Name.String() != "alice" || file[1].Hash.String() != sha512 {
		t.Fatalf("auth-file: %v %v", file, err)
	}
	m, err := FromSecret(map[string][]byte{"bob": []byte(sha512 + "\n"), "alice": []byte(bcrypt)}, TypeMap)
	if err != nil || Digest(m) != Digest(file) {
		t.Fatalf("auth-map: %v %v (digest differs from the same users as a file)", m, err)
	}
	for name, c := range map[string]struct {
		data map[string][]byte
		typ  string
	}{
		"no auth key":  {map[string][]byte{"users": []byte("a:" + bcrypt)}, TypeFile},
		"apr1 cut":     {map[string][]byte{"auth": []byte("a:$apr1$x$y")}, TypeFile},
		"{SHA}":        {map[string][]byte{"auth": []byte("a:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=")}, TypeFile},
		"no colon":     {map[string][]byte{"auth": []byte("a" + bcrypt)}, TypeFile},
		"evil name":    {map[string][]byte{"auth": []byte("a;evil:" + bcrypt)}, TypeFile},
		"evil hash":    {map[string][]byte{"auth": []byte("a:" + bcrypt + ";evil")}, TypeFile},
		"space":        {map[string][]byte{"auth": []byte("a: " + bcrypt)}, TypeFile},
		"twice":        {map[string][]byte{"auth": []byte("a:" + bcrypt + "\na:" + sha512)}, TypeFile},
		"empty":        {map[string][]byte{"auth": []byte("\n# none\n")}, TypeFile},
		"map evil key": {map[string][]byte{"a b": []byte(bcrypt)}, TypeMap},
		"map bad hash": {map[string][]byte{"a": []byte("secret")}, TypeMap},
		"unknown type": {map[string][]byte{"auth": []byte("a:" + bcrypt)}, "htpasswd"},
		"too many":     {map[string][]byte{"auth": []byte(manyUsers(MaxUsers + 1))}, TypeFile},
	} {
		if _, err := FromSecret(c.data, c.typ); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), bcrypt[7:]) || strings.Contains(err.Error(), "$y") {
			t.Errorf("%s: the error repeats a hash: %v", name, err)
		}
	}
}

// TestApacheAndMD5Crypt: htpasswd's default ($apr1$, checked in Lua)
// and MD5-crypt ($1$, which libxcrypt checks) are read; only the first
// is marked Apr1, and neither counts much toward the list's cost.
func TestApacheAndMD5Crypt(t *testing.T) {
	const apr1 = "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"
	const md5 = "$1$abcdefgh$cHJi5PXp/ki/ktXzqlk6I1"
	users, err := FromSecret(map[string][]byte{"auth": []byte("prom:" + apr1 + "\nold:" + md5 + "\nnew:" + bcrypt + "\n")}, TypeFile)
	if err != nil || len(users) != 3 {
		t.Fatalf("%v %v", users, err)
	}
	for _, u := range users {
		if u.Apr1 != (u.Name.String() == "prom") {
			t.Errorf("%s: Apr1 %v", u.Name, u.Apr1)
		}
	}
	if _, err := FromSecret(map[string][]byte{"auth": []byte(manyUsersWith(MaxUsers, apr1))}, TypeFile); err != nil {
		t.Errorf("%d apr1 users: %v", MaxUsers, err)
	}
}

// TestCostRefused: the hashes that held haproxy -c for minutes and a
// worker for seconds are refused, naming the line or key, never the hash;
// so is a list whose users cost too much together.
func TestCostRefused(t *testing.T) {
	cost12 := "$2y$12$" + bcrypt[7:]
	for name, c := range map[string]struct {
		data map[string][]byte
		typ  string
		want string
	}{
		"bcrypt 31": {map[string][]byte{"auth": []byte("alice:" + bcrypt + "\nmallory:$2y$31$" + bcrypt[7:])}, TypeFile,
			"line 2: user mallory: invalid password hash \"cost 31\": bcrypt cost 31, the limit is 12"},
		"bcrypt 16": {map[string][]byte{"mallory": []byte("$2b$16$" + bcrypt[7:])}, TypeMap, "key mallory: user mallory: invalid password hash \"cost 16\": bcrypt cost 16"},
		"rounds": {map[string][]byte{"auth": []byte("# x\nmallory:$6$rounds=999999999$" + sha512[3:])}, TypeFile,
			"line 2: user mallory: invalid password hash \"rounds 999999999\": SHA-crypt rounds=999999999, the limit is 5000"},
		"list": {map[string][]byte{"auth": []byte("a:" + cost12 + "\nb:" + cost12 + "\nc:" + cost12 + "\nd:" + cost12 + "\ne:" + bcrypt)}, TypeFile,
			"hashing the 5 users costs about 16416 bcrypt rounds, the limit is 16384"},
	} {
		_, err := FromSecret(c.data, c.typ)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), bcrypt[8:]) {
			t.Errorf("%s: the error repeats the hash: %v", name, err)
		}
	}
	if _, err := FromSecret(map[string][]byte{"auth": []byte("a:" + cost12 + "\nb:" + cost12 + "\nc:" + cost12 + "\nd:" + cost12)}, TypeFile); err != nil {
		t.Errorf("four users at cost 12: %v", err)
	}
	if _, err := FromSecret(map[string][]byte{"auth": []byte(manyUsers(MaxUsers))}, TypeFile); err == nil {
		t.Error("1000 users at cost 5 accepted")
	}
}

func manyUsers(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString("u" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)) + ":" + bcrypt + "\n")
	}
	return b.String()
}

func manyUsersWith(n int, hash string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("u" + strconv.Itoa(i) + ":" + hash + "\n")
	}
	return b.String()
}

// FuzzFromSecret: whatever a Secret holds, an accepted user has a name
// and hash that no config context reads as more than one word.
func FuzzFromSecret(f *testing.F) {
	for _, s := range []string{"alice:" + bcrypt, "bob:" + sha512 + "\r\n", "a:$apr1$x$y", "a:{SHA}x=", "a;evil:" + bcrypt,
		"a:" + bcrypt + ";evil", "a:" + bcrypt + "\n    http-request return status 200", "' if TRUE #:" + bcrypt} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		users, err := FromSecret(map[string][]byte{"auth": []byte(v)}, TypeFile)
		if err != nil {
			return
		}
		for _, u := range users {
			for _, s := range []string{u.Name.String(), u.Hash.String()} {
				if strings.ContainsAny(s, " \t\r\n'\"\\#%;:") || s == "" {
					t.Fatalf("%q accepted with %q", v, s)
				}
			}
		}
	})
}
