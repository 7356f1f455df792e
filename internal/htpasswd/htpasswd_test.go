package htpasswd

import (
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
		"apr1":         {map[string][]byte{"auth": []byte("a:$apr1$x$y")}, TypeFile},
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

func manyUsers(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString("u" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)) + ":" + bcrypt + "\n")
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
