package ociimage

import (
	"bufio"
	"debug/buildinfo"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// DebPackage is one installed package from a dpkg status file.
type DebPackage struct {
	Name          string
	Version       string
	Architecture  string
	Source        string // source package name; Name when the status has none
	SourceVersion string // source version; Version when the status has none
}

// ParseDpkgStatus reads /var/lib/dpkg/status and returns the installed
// packages sorted by name and architecture. Paragraphs whose Status is
// not "... installed" (removed, config-files) are left out.
func ParseDpkgStatus(r io.Reader) ([]DebPackage, error) {
	var pkgs []DebPackage
	fields := map[string]string{}
	flush := func() {
		if fields["Package"] != "" && strings.HasSuffix(fields["Status"], " installed") {
			pkgs = append(pkgs, debPackage(fields))
		}
		fields = map[string]string{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20) // long Description/Conffiles lines
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			// A continuation line; none of the fields we read has one.
		default:
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read dpkg status: %w", err)
	}
	flush()
	sort.Slice(pkgs, func(i, j int) bool {
		if pkgs[i].Name != pkgs[j].Name {
			return pkgs[i].Name < pkgs[j].Name
		}
		return pkgs[i].Architecture < pkgs[j].Architecture
	})
	return pkgs, nil
}

// debPackage builds a DebPackage from one status paragraph. Source may be
// "name" or "name (version)" when the binary's version differs.
func debPackage(f map[string]string) DebPackage {
	p := DebPackage{Name: f["Package"], Version: f["Version"], Architecture: f["Architecture"],
		Source: f["Package"], SourceVersion: f["Version"]}
	if src := f["Source"]; src != "" {
		name, ver, hasVer := strings.Cut(src, " (")
		p.Source = name
		if hasVer {
			p.SourceVersion = strings.TrimSuffix(ver, ")")
		}
	}
	return p
}

// GoBinary is what the Go toolchain stamped into a binary.
type GoBinary struct {
	GoVersion string // e.g. "go1.26.8"
	Path      string // main package path
	Module    string // main module path
	Version   string // the version pier reports (from -X main.version)
	Deps      []GoModule
}

// GoModule is one module linked into a Go binary.
type GoModule struct{ Path, Version string }

// ReadGoBinary reads the build information of the Go binary at path, the
// same data `go version -m` prints. version is pier's own version, which
// buildinfo does not know (it is set with -X).
func ReadGoBinary(path, version string) (GoBinary, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return GoBinary{}, fmt.Errorf("read Go build info of %s: %w", path, err)
	}
	b := GoBinary{GoVersion: info.GoVersion, Path: info.Path, Module: info.Main.Path, Version: version}
	for _, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		b.Deps = append(b.Deps, GoModule{Path: m.Path, Version: m.Version})
	}
	sort.Slice(b.Deps, func(i, j int) bool { return b.Deps[i].Path < b.Deps[j].Path })
	return b, nil
}

// SPDX 2.3 JSON shapes (only the fields this SBOM fills in).
type (
	SPDXDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      SPDXCreationInfo   `json:"creationInfo"`
		Packages          []SPDXPackage      `json:"packages"`
		Relationships     []SPDXRelationship `json:"relationships"`
	}
	SPDXCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	SPDXPackage struct {
		SPDXID           string            `json:"SPDXID"`
		Name             string            `json:"name"`
		VersionInfo      string            `json:"versionInfo,omitempty"`
		Supplier         string            `json:"supplier,omitempty"`
		DownloadLocation string            `json:"downloadLocation"`
		FilesAnalyzed    bool              `json:"filesAnalyzed"`
		LicenseConcluded string            `json:"licenseConcluded"`
		LicenseDeclared  string            `json:"licenseDeclared"`
		CopyrightText    string            `json:"copyrightText"`
		SourceInfo       string            `json:"sourceInfo,omitempty"`
		PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
		ExternalRefs     []SPDXExternalRef `json:"externalRefs,omitempty"`
	}
	SPDXExternalRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	SPDXRelationship struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
)

// SBOMInput is what goes into an image's SBOM.
type SBOMInput struct {
	Image      string // e.g. "docker.io/library/pier:dev"
	Created    time.Time
	Distro     string // purl distro qualifier, e.g. "debian-13"; "" when no Debian packages
	Debs       []DebPackage
	Pier       GoBinary
	Component  string // the binary's package name, e.g. "pier" or "pause"
	License    string // pier's SPDX license expression, or "" for NOASSERTION
	SourceRepo string // pier's source address, or ""
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes an SPDX element id from parts (letters, digits, "." and "-").
func spdxID(parts ...string) string {
	return "SPDXRef-" + spdxIDUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-")
}

// noAssertion fills the fields SPDX requires but that we do not know.
func noAssertion(p SPDXPackage) SPDXPackage {
	p.DownloadLocation = "NOASSERTION"
	p.LicenseConcluded = "NOASSERTION"
	p.LicenseDeclared = "NOASSERTION"
	p.CopyrightText = "NOASSERTION"
	return p
}

// purlEscape percent-encodes everything in a purl version or qualifier
// value but letters, digits and "._~-", as scanners expect ("1:2.41" is
// "1%3A2.41", "+deb13u1" is "%2Bdeb13u1").
func purlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("._~-", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// debSPDX describes one Debian package.
func debSPDX(d DebPackage, distro string) SPDXPackage {
	purl := fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", d.Name, purlEscape(d.Version), d.Architecture)
	if distro != "" {
		purl += "&distro=" + distro
	}
	if d.Source != d.Name || d.SourceVersion != d.Version {
		purl += "&upstream=" + purlEscape(d.Source+"@"+d.SourceVersion)
	}
	p := noAssertion(SPDXPackage{
		SPDXID:      spdxID("deb", d.Name, d.Architecture),
		Name:        d.Name,
		VersionInfo: d.Version,
		Supplier:    "Organization: Debian",
		SourceInfo:  fmt.Sprintf("built package from: %s %s", d.Source, d.SourceVersion),
		ExternalRefs: []SPDXExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl,
		}},
	})
	return p
}

// goSPDX describes one Go module (or the standard library).
func goSPDX(path, version string) SPDXPackage {
	return noAssertion(SPDXPackage{
		SPDXID:      spdxID("go", path, version),
		Name:        path,
		VersionInfo: version,
		ExternalRefs: []SPDXExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: "pkg:golang/" + path + "@" + purlEscape(version),
		}},
	})
}
