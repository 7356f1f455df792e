package ociimage

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Media types from the OCI image spec.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Annotations read by image tools when they import a layout.
const (
	// AnnotationRefName is the OCI spec's name of a manifest inside a
	// layout. It may hold a tag or a full reference; we write the full
	// reference because containerd 1.6's `ctr images import` uses a full
	// one as the image's name, while a bare tag "dev" becomes
	// "import-<date>:dev" unless --base-name is given (tried with 1.6.20).
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is the full image name containerd's
	// importer takes first, before AnnotationRefName.
	AnnotationContainerdName = "io.containerd.image.name"
)

// Descriptor points at a blob (OCI image spec, descriptor.md).
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Platform names the OS and CPU an image runs on.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// ContainerConfig is the runtime part of an image config ("config").
type ContainerConfig struct {
	User       string            `json:"User,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	StopSignal string            `json:"StopSignal,omitempty"`
}

// RootFS lists the layers' uncompressed digests, bottom first.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// History describes how one layer came to be.
type History struct {
	Created   string `json:"created,omitempty"`
	CreatedBy string `json:"created_by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// Config is the image config blob (OCI image spec, config.md).
type Config struct {
	Created      string          `json:"created,omitempty"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       ContainerConfig `json:"config"`
	RootFS       RootFS          `json:"rootfs"`
	History      []History       `json:"history,omitempty"`
}

// Manifest is the image manifest blob (OCI image spec, manifest.md).
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Index is a layout's index.json (OCI image spec, image-index.md).
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Spec is everything about an image except its layers' contents.
type Spec struct {
	Name         string // repository, e.g. "docker.io/library/pier"
	Tag          string // e.g. "dev"
	Architecture string // GOARCH spelling, e.g. "amd64"
	Created      time.Time
	Container    ContainerConfig
}

// Image is a written layout: its blobs are in a folder, and these are the
// facts the archive writer and the caller need.
type Image struct {
	Spec           Spec
	Layers         []Layer
	ConfigDigest   string
	ConfigSize     int64
	ManifestDigest string
	ManifestSize   int64
}

// Reference is the image's full name, e.g. "docker.io/library/pier:dev".
func (img *Image) Reference() string { return img.Spec.Name + ":" + img.Spec.Tag }

// CompressedSize is what a registry stores and a pull downloads: layers,
// config and manifest.
func (img *Image) CompressedSize() int64 {
	n := img.ConfigSize + img.ManifestSize
	for _, l := range img.Layers {
		n += l.Size
	}
	return n
}

// UncompressedSize is the sum of the layers' tar streams, close to what
// the image takes once unpacked.
func (img *Image) UncompressedSize() int64 {
	var n int64
	for _, l := range img.Layers {
		n += l.UncompressedSize
	}
	return n
}

// timestamp formats t as the RFC 3339 UTC form the spec asks for.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// NewConfig builds the config blob's value for spec and layers.
func NewConfig(spec Spec, layers []Layer) Config {
	c := Config{
		Created:      timestamp(spec.Created),
		Architecture: spec.Architecture,
		OS:           "linux",
		Config:       spec.Container,
		RootFS:       RootFS{Type: "layers", DiffIDs: []string{}},
	}
	for _, l := range layers {
		c.RootFS.DiffIDs = append(c.RootFS.DiffIDs, l.DiffID)
		c.History = append(c.History, History{Created: timestamp(spec.Created), CreatedBy: l.Comment})
	}
	return c
}

// NewManifest builds the manifest pointing at the config and layers.
func NewManifest(configDigest string, configSize int64, layers []Layer) Manifest {
	m := Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        Descriptor{MediaType: MediaTypeConfig, Digest: configDigest, Size: configSize},
		Layers:        []Descriptor{},
	}
	for _, l := range layers {
		m.Layers = append(m.Layers, Descriptor{MediaType: MediaTypeLayer, Digest: l.Digest, Size: l.Size})
	}
	return m
}

// NewIndex builds index.json naming the one manifest with its full
// reference in both annotations: containerd reads io.containerd.image.name
// first, tools that follow the OCI layout spec (skopeo, podman) read
// org.opencontainers.image.ref.name. containerd ignores manifest.json when
// index.json is there, so the index alone decides the name.
func (img *Image) NewIndex() Index {
	return Index{
		SchemaVersion: 2,
		MediaType:     MediaTypeIndex,
		Manifests: []Descriptor{{
			MediaType: MediaTypeManifest,
			Digest:    img.ManifestDigest,
			Size:      img.ManifestSize,
			Platform:  &Platform{Architecture: img.Spec.Architecture, OS: "linux"},
			Annotations: map[string]string{
				AnnotationContainerdName: img.Reference(),
				AnnotationRefName:        img.Reference(),
			},
		}},
	}
}

// Build writes one layer per folder in layerDirs (bottom first) into
// layoutDir's blobs, then the config and the manifest. comments gives
// each layer's history line. Call WriteArchive next.
func Build(layoutDir string, spec Spec, layerDirs, comments []string) (*Image, error) {
	if len(layerDirs) == 0 {
		return nil, errNoLayers
	}
	blobDir := filepath.Join(layoutDir, "blobs", "sha256")
	if err := os.MkdirAll(blobDir, 0o755); err != nil {
		return nil, fmt.Errorf("create blob folder: %w", err)
	}
	img := &Image{Spec: spec}
	for i, dir := range layerDirs {
		comment := ""
		if i < len(comments) {
			comment = comments[i]
		}
		l, err := WriteLayer(blobDir, dir, spec.Created, comment)
		if err != nil {
			return nil, err
		}
		img.Layers = append(img.Layers, l)
	}
	if err := img.writeMetadata(blobDir); err != nil {
		return nil, err
	}
	return img, nil
}

// writeMetadata stores the config and manifest blobs of img.
func (img *Image) writeMetadata(blobDir string) error {
	configJSON, err := json.Marshal(NewConfig(img.Spec, img.Layers))
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if img.ConfigDigest, err = writeBlob(blobDir, configJSON); err != nil {
		return err
	}
	img.ConfigSize = int64(len(configJSON))
	manifestJSON, err := json.Marshal(NewManifest(img.ConfigDigest, img.ConfigSize, img.Layers))
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if img.ManifestDigest, err = writeBlob(blobDir, manifestJSON); err != nil {
		return err
	}
	img.ManifestSize = int64(len(manifestJSON))
	return nil
}
