package encode

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
)

// FuzzQueryValue: a query value either is refused, or goes through every
// emitter intact (HTTPRoute queryParams reach ACL lines as values).
func FuzzQueryValue(f *testing.F) {
	seed(f, "1", "a:b/c", "a?b", "x-y_z.~!*+@")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := QueryValue(s)
		if err != nil {
			checkMessage(t, err)
			return
		}
		emitAll(t, v)
	})
}

// FuzzMatchSamples: a header or query name either is refused, or its
// fetch word is one token that closes its parenthesis at the end (no
// argument the sample parser could split), and a match key over any
// header and query values is a map key of fixed length that reads back
// whole: "<group><SHA-1 hex>...", what "<fetch>,sha1,hex" gives.
func FuzzMatchSamples(f *testing.F) {
	seed(f, "x-a", "q", "X-Only", "a.b~c")
	f.Fuzz(func(t *testing.T, s string) {
		for _, w := range []Word{FullHeaderSample(s), QueryParamSample(s)} {
			if err := w.Err(); err != nil {
				checkMessage(t, err)
				continue
			}
			open := strings.IndexByte(w.s, '(')
			if strings.ContainsAny(w.s[open+1:len(w.s)-1], "(), '\"\\#$%") || !strings.HasSuffix(w.s, ")") {
				t.Fatalf("fetch %s holds argument syntax", Printable(w.s))
			}
			line, err := ConfigLine(Lit("http-request"), Lit("set-var(txn.x)"), Concat(w, Lit(",sha1,hex")))
			if err != nil {
				t.Fatal(err)
			}
			assertTokens(t, line, "http-request", "set-var(txn.x)", w.s+",sha1,hex")
		}
		group := ID("pier_g", "0123456789abcdef")
		key := MatchKey(group, s, "", s+s)
		ml, err := MapLine(key, ID("be_", "0123abcd"))
		if err != nil {
			t.Fatalf("match key refused for %s: %v", Printable(s), err)
		}
		k, val, ok := parseMapLine(ml)
		sum := sha1.Sum([]byte(s))
		if !ok || val != "be_0123abcd" || len(k) != len(group.s)+3*40 ||
			k[len(group.s):len(group.s)+40] != strings.ToUpper(hex.EncodeToString(sum[:])) {
			t.Fatalf("match key %s read back as %q %q %v", Printable(ml), k, val, ok)
		}
	})
}

// FuzzHostSuffix: a Gateway wildcard is refused as WildcardHost refuses
// it, or its suffix (what the host must end with, an ACL value) goes
// through every emitter intact.
func FuzzHostSuffix(f *testing.F) {
	seed(f, "*.foo.com", "*.com", "*.a.b.c", "*", "*.")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := HostSuffix(s)
		_, werr := WildcardHost(s)
		if (err == nil) != (werr == nil) {
			t.Fatalf("HostSuffix and WildcardHost disagree on %s: %v, %v", Printable(s), err, werr)
		}
		if err != nil {
			checkMessage(t, err)
			return
		}
		if v.s != s[1:] || v.s[0] != '.' {
			t.Fatalf("suffix of %s is %s", Printable(s), Printable(v.s))
		}
		emitAll(t, v)
	})
}
