package encode

import "strings"

// userNameChars are the bytes of a basic-auth user name: what htpasswd
// users write, without ':' (it ends the name in an htpasswd line) and
// without any character a quoting context interprets.
var userNameChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@-")

// UserName validates a basic-auth user name: 1-64 letters, digits and
// "._@-".
func UserName(s string) (Value, error) {
	const k = "user name"
	if s == "" || len(s) > 64 {
		return Value{}, refuse(k, "length", s, "must be 1-64 characters")
	}
	for i := 0; i < len(s); i++ {
		if !userNameChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are letters, digits and ._@-")
		}
	}
	return Value{s}, nil
}

// cryptChars is crypt(3)'s base-64 alphabet.
var cryptChars = charset("./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

// Costs of a password hash. HAProxy hashes every user once when it
// checks or loads a configuration (to warn of a format crypt(3) does
// not know), in the master of a process other load balancers share,
// and again, in a worker thread, for every request with a password:
// what a hash costs, every tenant of the process waits for.
const (
	// MaxBcryptCost: 2^12 rounds take about 0.2 s of a CPU here (cost 5,
	// htpasswd -B's default, 1.7 ms), under HAProxy's 1 s watchdog.
	MaxBcryptCost = 12
	// MaxShaCryptRounds is glibc's and libxcrypt's default, what a hash
	// without "rounds=" costs: about 1 ms.
	MaxShaCryptRounds = 5000
)

// CryptHash validates a password hash HAProxy checks with the system's
// crypt(3) (Debian: libxcrypt), in the forms whose length and alphabet
// are fixed: bcrypt ("$2a$", "$2b$" or "$2y$", a cost 04 to
// MaxBcryptCost, 53 characters), SHA-512 ("$6$", 86) and SHA-256 ("$5$",
// 43) crypt, with an optional "rounds=N$" (N 1000 to MaxShaCryptRounds)
// and a salt of 1-16 characters, and MD5-crypt ("$1$", a salt of 1-8
// characters, 22; libxcrypt checks it, measured on bookworm). Apache's
// "$apr1$" and "{SHA}" are not crypt(3) formats: HAProxy 2.6 on Debian
// loads them without a warning and refuses every password (tried with
// htpasswd-made hashes), so they are refused here ($apr1$ goes through
// Apr1Hash instead). The error never repeats the hash.
func CryptHash(s string) (Value, error) {
	const k = "password hash"
	switch {
	case strings.HasPrefix(s, "$apr1$"):
		return Value{}, refuse(k, "apr1", "$apr1$...", "Apache MD5 ($apr1$) is not checked by crypt(3), HAProxy would refuse every password: regenerate it with htpasswd -B (bcrypt)")
	case strings.HasPrefix(s, "{SHA}"):
		return Value{}, refuse(k, "sha1", "{SHA}...", "{SHA} (htpasswd -s) is one unsalted SHA-1: whoever reads the Secret tests a dictionary at billions a second, and crypt(3) does not check it; regenerate it with htpasswd -B (bcrypt), or keep htpasswd's default ($apr1$)")
	case strings.HasPrefix(s, "$1$"):
		if md5Crypt(s[3:]) {
			return Value{s}, nil
		}
	case len(s) == 60 && (strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")):
		cost := s[4:6]
		if s[6] == '$' && cost >= "04" && cost <= "31" && cost[0] >= '0' && cost[0] <= '3' && cost[1] >= '0' && cost[1] <= '9' &&
			onlyCrypt(s[7:]) {
			if c := atoiDigits(cost); c > MaxBcryptCost {
				return Value{}, refuse(k, "cost", "cost "+cost, "bcrypt cost "+itoa(c)+", the limit is "+itoa(MaxBcryptCost)+
					": HAProxy hashes it on every check and reload of a process other load balancers share, and on every wrong password; regenerate it with htpasswd -B -C "+itoa(MaxBcryptCost)+" or lower")
			}
			return Value{s}, nil
		}
	case strings.HasPrefix(s, "$6$"), strings.HasPrefix(s, "$5$"):
		n := 86
		if s[1] == '5' {
			n = 43
		}
		rounds, ok := shaCrypt(s[3:], n)
		if ok && rounds > MaxShaCryptRounds {
			return Value{}, refuse(k, "cost", "rounds "+itoa(rounds), "SHA-crypt rounds="+itoa(rounds)+", the limit is "+itoa(MaxShaCryptRounds)+
				" (the default): HAProxy hashes it on every check and reload of a process other load balancers share, and on every wrong password; regenerate it without rounds=, or with htpasswd -B")
		}
		if ok {
			return Value{s}, nil
		}
	}
	return Value{}, refuse(k, "format", s[:min(len(s), 4)]+"...",
		"must be bcrypt ($2y$, $2b$, $2a$), SHA-512 ($6$), SHA-256 ($5$) or MD5 ($1$) crypt, or Apache MD5 ($apr1$): regenerate it with htpasswd -B")
}

// Apr1Hash validates Apache's MD5 password hash, what htpasswd writes by
// default: "$apr1$", a salt of 1-8 characters of crypt's alphabet, "$"
// and 22 characters. crypt(3) does not know it, so HAProxy's userlist
// cannot check it; render checks it in Lua instead (its apr1 action).
// The error never repeats the hash.
func Apr1Hash(s string) (Value, error) {
	rest, ok := strings.CutPrefix(s, "$apr1$")
	if !ok || !md5Crypt(rest) {
		return Value{}, refuse("password hash", "format", s[:min(len(s), 6)]+"...",
			"an Apache MD5 hash is $apr1$, a salt of 1-8 characters, $ and 22 characters (htpasswd's default)")
	}
	return Value{s}, nil
}

// md5Crypt checks "salt$hash" of MD5-crypt and Apache MD5: a salt of 1-8
// characters and a hash of 22, of crypt's alphabet.
func md5Crypt(s string) bool {
	salt, hash, found := strings.Cut(s, "$")
	return found && len(salt) >= 1 && len(salt) <= 8 && onlyCrypt(salt) && len(hash) == 22 && onlyCrypt(hash)
}

// CryptCost estimates what crypt(3) spends on a hash CryptHash
// accepted, in units of 2^0 bcrypt rounds (about 53 µs here): 2^cost
// for bcrypt, rounds/240 for SHA-crypt (5000 rounds, 1.1 ms, are 21).
func CryptCost(h Value) int {
	s := h.s
	switch {
	case len(s) > 7 && s[0] == '$' && s[1] == '2':
		return 1 << atoiDigits(s[4:6])
	case strings.HasPrefix(s, "$1$"):
		return 2 // 1,000 MD5 rounds, about 0.1 ms
	case strings.HasPrefix(s, "$6$") || strings.HasPrefix(s, "$5$"):
		rounds := MaxShaCryptRounds
		if rest, ok := strings.CutPrefix(s[3:], "rounds="); ok {
			digits, _, _ := strings.Cut(rest, "$")
			rounds = atoiDigits(digits)
		}
		return (rounds + 239) / 240
	}
	return 1
}

func atoiDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// shaCrypt checks "[rounds=N$]salt$hash" of SHA-crypt: N 1000-999999999,
// salt 1-16 characters, hash of n characters, and returns N (5000, the
// default, without "rounds=").
func shaCrypt(s string, n int) (rounds int, ok bool) {
	rounds = MaxShaCryptRounds
	if rest, ok := strings.CutPrefix(s, "rounds="); ok {
		digits, after, found := strings.Cut(rest, "$")
		if !found || len(digits) < 4 || len(digits) > 9 || strings.Trim(digits, "0123456789") != "" || digits[0] == '0' {
			return 0, false
		}
		rounds, s = atoiDigits(digits), after
	}
	salt, hash, found := strings.Cut(s, "$")
	return rounds, found && len(salt) >= 1 && len(salt) <= 16 && onlyCrypt(salt) && len(hash) == n && onlyCrypt(hash)
}

func onlyCrypt(s string) bool {
	for i := 0; i < len(s); i++ {
		if !cryptChars[s[i]] {
			return false
		}
	}
	return s != ""
}

// MaxRealmLen bounds a basic-auth realm: a line of text in a browser's
// dialog.
const MaxRealmLen = 128

var realmChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ._,:()/@!?-")

// Realm validates a basic-auth realm: 1-128 letters, digits, spaces and
// "._,:()/@!?-", not starting or ending with a space. HAProxy writes it
// between double quotes in WWW-Authenticate, where '"' or '\' would
// change its meaning; the rest keeps it plain text in every context.
func Realm(s string) (Value, error) {
	const k = "realm"
	if s == "" || len(s) > MaxRealmLen {
		return Value{}, refuse(k, "length", s, "must be 1-"+itoa(MaxRealmLen)+" bytes")
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return Value{}, refuse(k, "space", s, "must not start or end with a space")
	}
	for i := 0; i < len(s); i++ {
		if !realmChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are letters, digits, spaces and ._,:()/@!?-")
		}
	}
	return Value{s}, nil
}
