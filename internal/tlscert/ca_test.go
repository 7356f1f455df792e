package tlscert

import (
	"bytes"
	"strings"
	"testing"
)

// ParseCA re-encodes a ca.crt and refuses anything but well-formed
// CERTIFICATE blocks; equal certificates give equal digests whatever
// the Secret's line endings.
func TestParseCA(t *testing.T) {
	a, key := selfSigned(t, "a.example")
	b, _ := selfSigned(t, "b.example")
	both := append(append([]byte(nil), a...), b...)
	got, err := ParseCA(both)
	if err != nil || !bytes.Equal(got.PEM, both) || got.NotAfter.IsZero() {
		t.Fatalf("ParseCA: %v", err)
	}
	crlf, err := ParseCA([]byte(strings.ReplaceAll(string(both), "\n", "\r\n")))
	if err != nil || crlf.SHA256 != got.SHA256 || !bytes.Equal(crlf.PEM, got.PEM) {
		t.Errorf("CRLF: %v, digest %s vs %s", err, crlf.SHA256, got.SHA256)
	}
	for name, bad := range map[string][]byte{
		"empty":    nil,
		"key":      key,
		"cert+key": append(append([]byte(nil), a...), key...),
		"trailing": append(append([]byte(nil), a...), []byte("evil")...),
		"text":     []byte("hello"),
	} {
		if _, err := ParseCA(bad); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
