package encode

import (
	"strings"
	"testing"
)

func TestCryptHash(t *testing.T) {
	const bcrypt = "$2b$05$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	const sha512 = "$6$Ea1yNgy2jUg9amIr$h.OMJyaKB7QcQCFGkA52leL2i2SrycZ0WwA8tptjw7w5OOY81RkZMwE69n.wQh2Cs5nzhSPoquUgfXsgcnQN1/"
	const sha256 = "$5$12C1iHnz82B7pN8Z$4R6Pzl3UaQSfz523zxmyGrGN5EtIsuGZzToVBOVsun2"
	good := []string{bcrypt, "$2y$" + bcrypt[4:], "$2a$" + bcrypt[4:], sha512, sha256,
		"$5$rounds=5000$12C1iHnz82B7pN8Z$4R6Pzl3UaQSfz523zxmyGrGN5EtIsuGZzToVBOVsun2"}
	for _, h := range good {
		if _, err := CryptHash(h); err != nil {
			t.Errorf("CryptHash(%q): %v", h, err)
		}
	}
	bad := map[string]string{
		"$apr1$abc$def":                      "htpasswd -B",
		"{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=":  "htpasswd -B",
		"plain":                              "regenerate",
		"":                                   "regenerate",
		"$2b$03$" + bcrypt[7:]:               "regenerate", // cost below 04
		"$2b$05$" + bcrypt[7:] + "x":         "regenerate",
		"$2x$" + bcrypt[4:]:                  "regenerate",
		"$1$abcdefgh$abcdefghijklmnopqrstuv": "regenerate",
		"$5$rounds=12$12C1iHnz82B7pN8Z$4R6Pzl3UaQSfz523zxmyGrGN5EtIsuGZzToVBOVsun2": "regenerate",
		"$6$" + strings.Repeat("a", 17) + sha512[19:]:                               "regenerate",
	}
	for _, suffix := range []string{";evil", "'", " x", "\n", "$"} {
		for _, h := range good {
			bad[h+suffix] = "regenerate"
		}
	}
	for h, want := range bad {
		_, err := CryptHash(h)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CryptHash(%q) = %v, want an error saying %q", h, err, want)
		}
		if err != nil && len(h) > 12 && strings.Contains(err.Error(), h[8:]) {
			t.Errorf("CryptHash(%q): the error repeats the hash: %v", h, err)
		}
	}
}

func TestUserNameAndRealm(t *testing.T) {
	for _, s := range []string{"alice", "bob.smith@example.com", "ci-bot_2"} {
		if _, err := UserName(s); err != nil {
			t.Errorf("UserName(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "a:b", "alice;evil", "a b", "a'b", "é", strings.Repeat("a", 65), "a\n"} {
		if _, err := UserName(s); err == nil {
			t.Errorf("UserName(%q) accepted", s)
		}
	}
	if _, err := Realm("Authentication Required - foo"); err != nil {
		t.Error(err)
	}
	for _, s := range []string{"a\"b", "a\\b", "a'b", "%[src]", "a\nb", strings.Repeat("r", 129), "", "a;evil", " a", "a$b", "a#b"} {
		if _, err := Realm(s); err == nil {
			t.Errorf("Realm(%q) accepted", s)
		}
	}
}

func TestSamples(t *testing.T) {
	if w := HeaderSample("X-Canary"); w.Err() != nil || w.String() != "req.hdr(X-Canary)" {
		t.Errorf("%q %v", w.String(), w.Err())
	}
	if w := CookieSample("canary_v2"); w.Err() != nil || w.String() != "req.cook(canary_v2)" {
		t.Errorf("%q %v", w.String(), w.Err())
	}
	for _, bad := range []string{"X)", "X,y", "X;evil", "", "X Y", "X'"} {
		if HeaderSample(bad).Err() == nil || CookieSample(bad).Err() == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
