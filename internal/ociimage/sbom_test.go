package ociimage

import (
	"encoding/json"
	"strings"
	"testing"
)

const testStatus = `Package: libc6
Status: install ok installed
Priority: optional
Architecture: amd64
Source: glibc
Version: 2.41-12+deb13u5
Description: GNU C Library: Shared libraries
 Contains the standard libraries.

Package: haproxy
Status: install ok installed
Architecture: amd64
Version: 3.0.11-1+deb13u5
Conffiles:
 /etc/haproxy/haproxy.cfg abc

Package: gone
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libcap2
Status: install ok installed
Architecture: amd64
Source: libcap2 (1:2.75-10+deb13u1)
Version: 1:2.75-10+deb13u1+b3
`

func TestParseDpkgStatus(t *testing.T) {
	pkgs, err := ParseDpkgStatus(strings.NewReader(testStatus))
	if err != nil {
		t.Fatal(err)
	}
	want := []DebPackage{
		{Name: "haproxy", Version: "3.0.11-1+deb13u5", Architecture: "amd64", Source: "haproxy", SourceVersion: "3.0.11-1+deb13u5"},
		{Name: "libc6", Version: "2.41-12+deb13u5", Architecture: "amd64", Source: "glibc", SourceVersion: "2.41-12+deb13u5"},
		{Name: "libcap2", Version: "1:2.75-10+deb13u1+b3", Architecture: "amd64", Source: "libcap2", SourceVersion: "1:2.75-10+deb13u1"},
	}
	if len(pkgs) != len(want) {
		t.Fatalf("got %+v", pkgs)
	}
	for i := range want {
		if pkgs[i] != want[i] {
			t.Errorf("package %d: %+v, want %+v", i, pkgs[i], want[i])
		}
	}
}

func testSBOMInput(t *testing.T) SBOMInput {
	t.Helper()
	debs, err := ParseDpkgStatus(strings.NewReader(testStatus))
	if err != nil {
		t.Fatal(err)
	}
	return SBOMInput{
		Image: "docker.io/library/pier:dev", Created: testEpoch, Distro: "debian-13", Debs: debs,
		Pier: GoBinary{GoVersion: "go1.26.8", Path: "pier.dev/pier/cmd/pier", Module: "pier.dev/pier", Version: "v1.2.3",
			Deps: []GoModule{{Path: "golang.org/x/sys", Version: "v0.48.0"}}},
	}
}

func TestSBOM(t *testing.T) {
	doc, err := NewSBOM(testSBOMInput(t))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := NewSBOM(testSBOMInput(t))
	a, _ := MarshalSBOM(doc)
	b, _ := MarshalSBOM(again)
	if string(a) != string(b) {
		t.Error("same input, different SBOMs")
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" ||
		!strings.HasPrefix(doc.DocumentNamespace, namespaceBase+"docker.io-library-pier-dev-") {
		t.Errorf("document header: %+v", doc)
	}
	other := testSBOMInput(t)
	other.Pier.Version = "v1.2.4"
	changed, _ := NewSBOM(other)
	if changed.DocumentNamespace == doc.DocumentNamespace {
		t.Error("different content, same namespace")
	}
	byName := map[string]SPDXPackage{}
	for _, p := range doc.Packages {
		byName[p.Name] = p
		if !strings.HasPrefix(p.SPDXID, "SPDXRef-") || strings.ContainsAny(p.SPDXID, ":+/ ") {
			t.Errorf("bad SPDXID %q", p.SPDXID)
		}
	}
	wantPurls := map[string]string{
		"libcap2":          "pkg:deb/debian/libcap2@1%3A2.75-10%2Bdeb13u1%2Bb3?arch=amd64&distro=debian-13&upstream=libcap2%401%3A2.75-10%2Bdeb13u1",
		"libc6":            "pkg:deb/debian/libc6@2.41-12%2Bdeb13u5?arch=amd64&distro=debian-13&upstream=glibc%402.41-12%2Bdeb13u5",
		"pier":             "pkg:golang/pier.dev/pier@v1.2.3",
		"stdlib":           "pkg:golang/stdlib@1.26.8",
		"golang.org/x/sys": "pkg:golang/golang.org/x/sys@v0.48.0",
	}
	for name, purl := range wantPurls {
		p, ok := byName[name]
		if !ok || len(p.ExternalRefs) != 1 || p.ExternalRefs[0].ReferenceLocator != purl {
			t.Errorf("%s: %+v, want purl %s", name, p, purl)
		}
	}
	if len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%d relationships for %d packages", len(doc.Relationships), len(doc.Packages))
	}
}

// TestSBOMRequiredFields checks the SPDX 2.3 fields every package and the
// document must have.
func TestSBOMRequiredFields(t *testing.T) {
	doc, err := NewSBOM(testSBOMInput(t))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := MarshalSBOM(doc)
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"spdxVersion", "dataLicense", "SPDXID", "name", "documentNamespace", "creationInfo"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("document lacks %s", f)
		}
	}
	for _, p := range raw["packages"].([]any) {
		pkg := p.(map[string]any)
		for _, f := range []string{"SPDXID", "name", "downloadLocation"} {
			if _, ok := pkg[f]; !ok {
				t.Errorf("package %v lacks %s", pkg["name"], f)
			}
		}
	}
}
