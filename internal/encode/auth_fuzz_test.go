package encode

import (
	"strings"
	"testing"
)

// FuzzAuthAndCanaryWords: the validators of basic auth (user name,
// password hash, realm) and of canaries (header and cookie samples,
// compared values): whatever they accept emits as one word in every
// context, and a refusal's message is printable.
func FuzzAuthAndCanaryWords(f *testing.F) {
	seed(f, "alice", "$2y$05$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C",
		"$6$Ea1yNgy2jUg9amIr$h.OMJyaKB7QcQCFGkA52leL2i2SrycZ0WwA8tptjw7w5OOY81RkZMwE69n.wQh2Cs5nzhSPoquUgfXsgcnQN1/",
		"Authentication Required - foo", "X-Canary", "canary", "v2 beta", "$apr1$x$y", "a;evil", "a)", "a' if TRUE #")
	f.Fuzz(func(t *testing.T, s string) {
		for _, validate := range []func(string) (Value, error){UserName, CryptHash, Realm, PlainValue} {
			v, err := validate(s)
			if err != nil {
				checkMessage(t, err)
				continue
			}
			emitAll(t, v)
		}
		for _, w := range []Word{HeaderSample(s), CookieSample(s)} {
			if w.Err() != nil {
				continue
			}
			inner := strings.TrimSuffix(strings.SplitN(w.String(), "(", 2)[1], ")")
			if inner != s || strings.ContainsAny(inner, "(),' \\\"#$%") {
				t.Fatalf("%q accepted as %q", s, w.String())
			}
		}
	})
}
