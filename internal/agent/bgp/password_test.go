package bgp

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

func TestReadPasswords(t *testing.T) {
	pws, err := ReadPasswords(strings.NewReader("# routers\n10.0.0.1  s3cret with spaces  \n\n*\tfor the others\nfd00::1 v6\n"))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]Password{"10.0.0.1": "s3cret with spaces", "::ffff:10.0.0.1": "s3cret with spaces",
		"fd00::1": "v6", "10.0.0.2": "for the others"} {
		if got := pws.For(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: password %q, want %q", addr, string(got), string(want))
		}
	}
	if pw, _ := ReadPasswords(strings.NewReader("10.0.0.1 x\n")); pw.For(netip.MustParseAddr("10.0.0.2")) != "" {
		t.Errorf("a peer the file does not name got a password without a * line")
	}
	for name, in := range map[string]string{
		"no password":    "10.0.0.1\n",
		"no address":     "hunter2 hunter3\n",
		"two defaults":   "* a\n* b\n",
		"two for a peer": "10.0.0.1 a\n10.0.0.1 b\n",
		"too long":       "10.0.0.1 " + strings.Repeat("x", 81) + "\n",
		"a NUL":          "10.0.0.1 a\x00b\n",
	} {
		_, err := ReadPasswords(strings.NewReader(in))
		if err == nil {
			t.Errorf("%s: read without an error", name)
			continue
		}
		if strings.Contains(err.Error(), "hunter") || strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s: the error quotes the password: %v", name, err)
		}
	}
}

// A Password never shows in the forms a configuration is printed in.
func TestPasswordRedacted(t *testing.T) {
	cfg := Config{ASN: 1, Peers: []Peer{{Address: netip.MustParseAddr("10.0.0.1"), ASN: 2, Password: "hunter2"}}}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "cfg", cfg, "pw", cfg.Peers[0].Password)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "cfg", cfg, "peer", cfg.Peers[0])
	js, _ := json.Marshal(cfg)
	for form, s := range map[string]string{"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg),
		//lint:ignore S1025 the %s verb itself is what is checked
		"%s": fmt.Sprintf("%s", cfg.Peers[0].Password), "json": string(js), "slog": logged.String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%s shows the password: %s", form, s)
		}
	}
}
