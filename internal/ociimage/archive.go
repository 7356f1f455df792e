package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Layout is the content of an OCI layout's oci-layout file.
type Layout struct {
	ImageLayoutVersion string `json:"imageLayoutVersion"`
}

// DockerManifest is one entry of the manifest.json that `docker load`
// reads; listing the OCI blobs there lets Docker load the same archive.
type DockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// archiveFile is one member of the archive: either bytes or a file.
type archiveFile struct {
	name string
	data []byte // used when path is empty
	path string
}

// metadataFiles returns oci-layout, index.json and manifest.json for img.
func (img *Image) metadataFiles() ([]archiveFile, error) {
	layout, err := json.Marshal(Layout{ImageLayoutVersion: "1.0.0"})
	if err != nil {
		return nil, fmt.Errorf("encode oci-layout: %w", err)
	}
	index, err := json.Marshal(img.NewIndex())
	if err != nil {
		return nil, fmt.Errorf("encode index.json: %w", err)
	}
	docker := DockerManifest{
		Config:   "blobs/sha256/" + strings.TrimPrefix(img.ConfigDigest, "sha256:"),
		RepoTags: []string{img.Reference()},
		Layers:   []string{},
	}
	for _, l := range img.Layers {
		docker.Layers = append(docker.Layers, "blobs/sha256/"+strings.TrimPrefix(l.Digest, "sha256:"))
	}
	dockerJSON, err := json.Marshal([]DockerManifest{docker})
	if err != nil {
		return nil, fmt.Errorf("encode manifest.json: %w", err)
	}
	return []archiveFile{
		{name: "index.json", data: index},
		{name: "manifest.json", data: dockerJSON},
		{name: "oci-layout", data: layout},
	}, nil
}

// WriteArchive writes the layout in layoutDir, whose blobs Build wrote,
// as one uncompressed tar at path: the same member order, owner and mtime
// every time, so the archive file itself is reproducible too.
func (img *Image) WriteArchive(layoutDir, path string) error {
	files, err := img.metadataFiles()
	if err != nil {
		return err
	}
	blobDir := filepath.Join(layoutDir, "blobs", "sha256")
	blobs, err := os.ReadDir(blobDir)
	if err != nil {
		return fmt.Errorf("list blobs: %w", err)
	}
	for _, b := range blobs {
		if strings.HasPrefix(b.Name(), ".") {
			continue // a temp file of a failed build
		}
		files = append(files, archiveFile{name: "blobs/sha256/" + b.Name(), path: filepath.Join(blobDir, b.Name())})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	tmp := path + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("create archive: %w", err)
	}
	defer os.Remove(tmp) // no-op once renamed
	defer out.Close()
	if err := writeArchiveTar(out, files, img.Spec.Created); err != nil {
		return fmt.Errorf("write archive %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close archive: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename archive into place: %w", err)
	}
	return nil
}

// writeArchiveTar writes the folders blobs/ and blobs/sha256/ and then
// files, all owned by 0:0 with mtime epoch.
func writeArchiveTar(out io.Writer, files []archiveFile, epoch time.Time) error {
	tw := tar.NewWriter(out)
	mtime := epoch.UTC().Truncate(time.Second)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		h := &tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar header %s: %w", dir, err)
		}
	}
	for _, f := range files {
		if err := writeArchiveMember(tw, f, mtime); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeArchiveMember writes one regular file into the archive.
func writeArchiveMember(tw *tar.Writer, f archiveFile, mtime time.Time) error {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, ModTime: mtime, Size: int64(len(f.data))}
	if f.path == "" {
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar header %s: %w", f.name, err)
		}
		_, err := tw.Write(f.data)
		return err
	}
	src, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("open blob: %w", err)
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return fmt.Errorf("stat blob: %w", err)
	}
	h.Size = info.Size()
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("tar header %s: %w", f.name, err)
	}
	if _, err := io.Copy(tw, src); err != nil {
		return fmt.Errorf("copy blob %s: %w", f.name, err)
	}
	return nil
}
