package accesslog

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// randomText mixes what a client may send and a JSON string must
// escape: quotes, backslashes, control bytes, multi-byte and invalid
// UTF-8, U+2028.
func randomText(r *rand.Rand) string {
	parts := []string{"a", "/", "\"", "\\", "\x00", "\x1f", "\n", "\t", "é", "\u2028", "\xff", "<", "&", "%22", " ", "日本"}
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// TestCodecMatchesEncodingJSON: the hand-written decoder reads every
// wire line as encoding/json does, and appendLine writes what
// encoding/json reads back as the same Line.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		fields := map[string]any{"t": json.Number("1796174603.086"), "ca": randomText(r), "cp": r.IntN(65536),
			"m": randomText(r), "h": randomText(r), "p": randomText(r), "st": r.IntN(600) - 1,
			"bo": r.Int64N(1 << 40), "bi": r.Int64N(1 << 20), "ta": r.IntN(10000) - 1, "tc": -1, "tr": r.IntN(100), "tw": 0,
			"f": randomText(r), "b": randomText(r), "s": randomText(r), "sa": randomText(r), "sp": "-",
			"id": randomText(r), "ts": "----", "extra": r.IntN(3)}
		raw, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		var want, got wire
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if err := decode(raw, &got); err != nil {
			t.Fatalf("%d: %v\n%s", i, err, raw)
		}
		if got != want {
			t.Fatalf("%d: decoded\n%+v\nencoding/json:\n%+v\n%s", i, got, want, raw)
		}
		line := Line{Time: "x", ClientAddr: randomText(r), ClientPort: got.ClientPort, Method: got.Method, Host: got.Host,
			Path: got.Path, Status: got.Status, BytesSent: got.Sent, Namespace: randomText(r), Ingress: randomText(r),
			Service: got.Server, Pod: randomText(r), RequestID: got.RequestID, LoadBalancer: randomText(r), TerminationState: got.Term}
		var back, oracle Line
		if err := json.Unmarshal(appendLine(nil, &line), &back); err != nil {
			t.Fatalf("%d: appendLine wrote no JSON: %v\n%s", i, err, appendLine(nil, &line))
		}
		std, _ := json.Marshal(line)
		json.Unmarshal(std, &oracle)
		if !reflect.DeepEqual(back, oracle) {
			t.Fatalf("%d: appendLine gives\n%+v\nencoding/json\n%+v", i, back, oracle)
		}
	}
	for _, bad := range []string{``, `{`, `{"t":1`, `{"t":1,}`, `{"t":x}`, `{"p":"a` + "\x01" + `"}`, `{"p":"\xff"}`, `{"p":"a"}x`, `[1]`, `{"st":"1"}`} {
		var w wire
		if err := decode([]byte(bad), &w); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
