package ociimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// namespaceBase prefixes every SBOM's documentNamespace. SPDX wants a
// unique URI; it need not resolve.
const namespaceBase = "https://pier.dev/spdx/"

// NewSBOM builds the SPDX 2.3 document for in: one package for the image,
// which CONTAINS every Debian package and pier, which STATIC_LINKs its Go
// modules and the Go standard library. The documentNamespace ends in the
// SHA-256 of the document written without it, so the same content always
// gets the same namespace and different content a different one. (The
// image digest cannot be used: the SBOM is inside the image.)
func NewSBOM(in SBOMInput) (SPDXDocument, error) {
	doc := SPDXDocument{
		SPDXVersion:  "SPDX-2.3",
		DataLicense:  "CC0-1.0",
		SPDXID:       "SPDXRef-DOCUMENT",
		Name:         in.Image,
		CreationInfo: SPDXCreationInfo{Created: timestamp(in.Created), Creators: []string{"Tool: pier-ociimage"}},
	}
	image := noAssertion(SPDXPackage{SPDXID: "SPDXRef-Image", Name: in.Image, PrimaryPurpose: "CONTAINER"})
	doc.Packages = append(doc.Packages, image)
	doc.Relationships = append(doc.Relationships, SPDXRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", image.SPDXID})
	for _, d := range in.Debs {
		p := debSPDX(d, in.Distro)
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, SPDXRelationship{image.SPDXID, "CONTAINS", p.SPDXID})
	}
	pier := pierSPDX(in)
	doc.Packages = append(doc.Packages, pier)
	doc.Relationships = append(doc.Relationships, SPDXRelationship{image.SPDXID, "CONTAINS", pier.SPDXID})
	linked := []GoModule{{Path: "stdlib", Version: strings.TrimPrefix(in.Pier.GoVersion, "go")}}
	linked = append(linked, in.Pier.Deps...)
	for _, m := range linked {
		p := goSPDX(m.Path, m.Version)
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, SPDXRelationship{pier.SPDXID, "STATIC_LINK", p.SPDXID})
	}
	ns, err := contentNamespace(doc)
	if err != nil {
		return SPDXDocument{}, err
	}
	doc.DocumentNamespace = ns
	return doc, nil
}

// pierSPDX describes the pier binary (or another of pier's, like pause).
func pierSPDX(in SBOMInput) SPDXPackage {
	p := goSPDX(in.Pier.Module, in.Pier.Version)
	name := in.Component
	if name == "" {
		name = "pier"
	}
	p.SPDXID = spdxID("Package", name)
	p.Name = name
	p.PrimaryPurpose = "APPLICATION"
	if in.License != "" {
		p.LicenseDeclared = in.License
	}
	if in.SourceRepo != "" {
		p.DownloadLocation = in.SourceRepo
	}
	p.SourceInfo = "built with " + in.Pier.GoVersion + " from " + in.Pier.Path
	return p
}

// contentNamespace hashes doc (whose namespace is still empty) into one.
func contentNamespace(doc SPDXDocument) (string, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encode SBOM for its namespace: %w", err)
	}
	sum := sha256.Sum256(data)
	name := spdxIDUnsafe.ReplaceAllString(doc.Name, "-")
	return namespaceBase + name + "-" + hex.EncodeToString(sum[:]), nil
}

// MarshalSBOM encodes doc as indented JSON ending in a newline.
func MarshalSBOM(doc SPDXDocument) ([]byte, error) {
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode SBOM: %w", err)
	}
	return append(data, '\n'), nil
}
