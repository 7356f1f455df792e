package haproxydriver

import (
	"errors"
	"os"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/test/harness"
)

// caMaps serves ConfigMaps by namespace/name.
type caMaps map[string]map[string]string

func (m caMaps) ConfigMapData(namespace, name string) (map[string]string, error) {
	if d, ok := m[namespace+"/"+name]; ok {
		return d, nil
	}
	return nil, errors.New("not found")
}

// A listener's client CA bundle is the ConfigMaps' ca.crt joined in
// order and re-encoded, written once under its digest and kept by the
// pruning; a ConfigMap that changed since translation is not served, nor
// is anything by an agent that reads no ConfigMaps.
func TestClientCAWritten(t *testing.T) {
	d := newDriver(t, harness.ShortTempDir(t))
	t.Cleanup(func() { d.Close(true) })
	a, _ := selfSignedPEM(t, "a.ca")
	b, _ := selfSignedPEM(t, "b.ca")
	maps := caMaps{"ns/a": {"ca.crt": strings.ReplaceAll(string(a), "\n", "\r\n")}, "shared/b": {"ca.crt": string(b)}}
	pa, _ := tlscert.ParseCA(a)
	pb, _ := tlscert.ParseCA(b)
	want, err := tlscert.JoinCA(pa.PEM, pb.PEM)
	if err != nil {
		t.Fatal(err)
	}
	lb := lbWith(1, freePort(t), memberAt("127.0.0.1:1"))
	lb.Listeners[0].ClientValidation = &model.ClientValidation{
		CAs: []model.ConfigMapRef{{Namespace: "ns", Name: "a"}, {Namespace: "shared", Name: "b"}}, SHA256: want.SHA256}
	at, _ := d.layout.LB(lb.UUID)
	if err := os.MkdirAll(at.CertsDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := d.writeClientCAs(lb, at); err == nil || !strings.Contains(err.Error(), "reads no ConfigMaps") {
		t.Fatalf("without ConfigMaps: %v", err)
	}
	d.cfg.ConfigMaps = maps
	if changed, err := d.writeClientCAs(lb, at); err != nil || !changed {
		t.Fatalf("first write: %v, changed %v", err, changed)
	}
	path, _ := at.ClientCA(want.SHA256)
	if got, err := os.ReadFile(path); err != nil || string(got) != string(want.PEM) {
		t.Fatalf("bundle %v:\n%s", err, got)
	}
	if changed, err := d.writeClientCAs(lb, at); err != nil || changed {
		t.Fatalf("second write: %v, changed %v", err, changed)
	}
	if paths := clientCAPaths(at, lb); len(paths) != 1 || paths[0] != path {
		t.Fatalf("kept %v", paths)
	}
	c, _ := selfSignedPEM(t, "c.ca")
	maps["shared/b"]["ca.crt"] = string(c)
	if _, err := d.writeClientCAs(lb, at); err == nil || !strings.Contains(err.Error(), "changed since it was translated") {
		t.Fatalf("changed ConfigMap: %v", err)
	}
}
