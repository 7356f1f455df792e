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
		"$5$rounds=5000$12C1iHnz82B7pN8Z$4R6Pzl3UaQSfz523zxmyGrGN5EtIsuGZzToVBOVsun2",
		"$2y$12$" + bcrypt[7:], "$6$rounds=1000$" + sha512[3:],
		"$1$abcdefgh$cHJi5PXp/ki/ktXzqlk6I1", "$1$a$cHJi5PXp/ki/ktXzqlk6I1"} // openssl passwd -1
	for _, h := range good {
		if _, err := CryptHash(h); err != nil {
			t.Errorf("CryptHash(%q): %v", h, err)
		}
	}
	bad := map[string]string{
		"$apr1$abc$def":                       "htpasswd -B",
		"{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=":   "htpasswd -B",
		"plain":                               "regenerate",
		"":                                    "regenerate",
		"$2b$03$" + bcrypt[7:]:                "regenerate", // cost below 04
		"$2b$05$" + bcrypt[7:] + "x":          "regenerate",
		"$2x$" + bcrypt[4:]:                   "regenerate",
		"$1$abcdefghi$cHJi5PXp/ki/ktXzqlk6I1": "regenerate", // a salt of 9
		"$1$abcdefgh$cHJi5PXp/ki/ktXzqlk6I":   "regenerate",
		"$1$$cHJi5PXp/ki/ktXzqlk6I1":          "regenerate",
		"$5$rounds=12$12C1iHnz82B7pN8Z$4R6Pzl3UaQSfz523zxmyGrGN5EtIsuGZzToVBOVsun2": "regenerate",
		"$6$" + strings.Repeat("a", 17) + sha512[19:]:                               "regenerate",
		// The cost attacks: minutes of haproxy -c, seconds of a worker.
		"$2b$31$" + bcrypt[7:]:              "bcrypt cost 31, the limit is 12",
		"$2y$16$" + bcrypt[7:]:              "bcrypt cost 16, the limit is 12",
		"$2a$13$" + bcrypt[7:]:              "htpasswd -B -C 12",
		"$6$rounds=999999999$" + sha512[3:]: "SHA-crypt rounds=999999999, the limit is 5000",
		"$5$rounds=5001$" + sha256[3:]:      "rounds=5001",
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

// TestApr1Hash: htpasswd's default form, nothing else.
func TestApr1Hash(t *testing.T) {
	const h = "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/" // openssl passwd -apr1
	for _, good := range []string{h, "$apr1$a$h9FWgUz3n9YxylKLlR5SQ/"} {
		if _, err := Apr1Hash(good); err != nil {
			t.Errorf("Apr1Hash(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", "$1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/", "$apr1$abcdefghi$h9FWgUz3n9YxylKLlR5SQ/",
		"$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ", h + "x", h + "\n", "$apr1$ab;d$h9FWgUz3n9YxylKLlR5SQ/", "$apr1$$h9FWgUz3n9YxylKLlR5SQ/"} {
		_, err := Apr1Hash(bad)
		if err == nil {
			t.Errorf("Apr1Hash(%q) accepted", bad)
		} else if len(bad) > 16 && strings.Contains(err.Error(), bad[14:]) {
			t.Errorf("Apr1Hash(%q): the error repeats the hash: %v", bad, err)
		}
	}
}

// TestCryptCost: the estimate follows the work, 2^cost for bcrypt.
func TestCryptCost(t *testing.T) {
	const b = "Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	const salted = "Ea1yNgy2jUg9amIr$h.OMJyaKB7QcQCFGkA52leL2i2SrycZ0WwA8tptjw7w5OOY81RkZMwE69n.wQh2Cs5nzhSPoquUgfXsgcnQN1/"
	for h, want := range map[string]int{"$2y$05$" + b: 32, "$2b$12$" + b: 4096, "$6$" + salted: 21, "$6$rounds=1000$" + salted: 5} {
		v, err := CryptHash(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := CryptCost(v); got != want {
			t.Errorf("%s: cost %d, want %d", h[:7], got, want)
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
