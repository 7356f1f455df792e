package ociimage

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func testSpec() Spec {
	return Spec{
		Name: "docker.io/library/pier", Tag: "dev", Architecture: "amd64", Created: testEpoch,
		Container: ContainerConfig{
			User: "65532:65532", Entrypoint: []string{"/usr/local/bin/pier"}, Cmd: []string{"controller"},
			Env:    []string{"PATH=/usr/bin"},
			Labels: map[string]string{"org.opencontainers.image.version": "dev", "org.opencontainers.image.title": "pier"},
		},
	}
}

// buildArchive builds an image of two layers from the same tree and
// writes its archive; it returns the image and the archive's path.
func buildArchive(t *testing.T, root string) (*Image, string) {
	t.Helper()
	dir := t.TempDir()
	img, err := Build(filepath.Join(dir, "layout"), testSpec(), []string{root, root}, []string{"base", "top"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	if err := img.WriteArchive(filepath.Join(dir, "layout"), out); err != nil {
		t.Fatal(err)
	}
	return img, out
}

func TestBuildReproducible(t *testing.T) {
	root := makeTree(t)
	a, archiveA := buildArchive(t, root)
	b, archiveB := buildArchive(t, root)
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest {
		t.Errorf("same input, different digests: %s %s", a.ManifestDigest, b.ManifestDigest)
	}
	dataA, _ := os.ReadFile(archiveA)
	dataB, _ := os.ReadFile(archiveB)
	if sha(dataA) != sha(dataB) {
		t.Errorf("same input, different archives")
	}
}

// archiveMembers reads the archive's members into a map of name to bytes.
func archiveMembers(t *testing.T, path string) ([]string, map[string][]byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
		if !h.ModTime.Equal(testEpoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("archive member %s: mtime %v owner %d:%d", h.Name, h.ModTime, h.Uid, h.Gid)
		}
	}
	return names, files
}

func TestArchiveLayoutAndDiffIDs(t *testing.T) {
	img, path := buildArchive(t, makeTree(t))
	names, files := archiveMembers(t, path)
	for _, want := range []string{"oci-layout", "index.json", "manifest.json",
		"blobs/sha256/" + strings.TrimPrefix(img.ManifestDigest, "sha256:")} {
		if _, ok := files[want]; !ok {
			t.Errorf("archive has no %s (members %q)", want, names)
		}
	}
	var cfg Config
	blob := files["blobs/sha256/"+strings.TrimPrefix(img.ConfigDigest, "sha256:")]
	if err := json.Unmarshal(blob, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.RootFS.DiffIDs) != 2 {
		t.Fatalf("diff_ids %q", cfg.RootFS.DiffIDs)
	}
	for i, l := range img.Layers {
		if cfg.RootFS.DiffIDs[i] != l.DiffID {
			t.Errorf("diff_id %d is %s, layer's uncompressed digest %s", i, cfg.RootFS.DiffIDs[i], l.DiffID)
		}
		if sha(files["blobs/sha256/"+strings.TrimPrefix(l.Digest, "sha256:")]) != l.Digest {
			t.Errorf("layer %d blob does not match its digest", i)
		}
	}
	if cfg.Created != "2023-11-14T22:13:20Z" || len(cfg.History) != 2 || cfg.History[1].CreatedBy != "top" {
		t.Errorf("created %q history %+v", cfg.Created, cfg.History)
	}
	var docker []DockerManifest
	if err := json.Unmarshal(files["manifest.json"], &docker); err != nil {
		t.Fatal(err)
	}
	if len(docker) != 1 || docker[0].RepoTags[0] != "docker.io/library/pier:dev" || len(docker[0].Layers) != 2 {
		t.Errorf("manifest.json %+v", docker)
	}
}

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// TestJSONShapes checks the encoded blobs against the OCI image spec's
// required fields: each path must be present, and digests well formed.
func TestJSONShapes(t *testing.T) {
	img, path := buildArchive(t, makeTree(t))
	_, files := archiveMembers(t, path)
	blob := func(d string) []byte { return files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	tests := []struct {
		name     string
		data     []byte
		required []string // dotted paths; [0] indexes an array
		equals   map[string]any
	}{
		{"oci-layout", files["oci-layout"], []string{"imageLayoutVersion"}, map[string]any{"imageLayoutVersion": "1.0.0"}},
		{"index", files["index.json"],
			[]string{"schemaVersion", "mediaType", "manifests", "manifests.0.mediaType", "manifests.0.digest", "manifests.0.size"},
			map[string]any{"schemaVersion": 2.0, "mediaType": MediaTypeIndex, "manifests.0.mediaType": MediaTypeManifest,
				"manifests.0.annotations." + AnnotationRefName:        "docker.io/library/pier:dev",
				"manifests.0.annotations." + AnnotationContainerdName: "docker.io/library/pier:dev"}},
		{"manifest", blob(img.ManifestDigest),
			[]string{"schemaVersion", "mediaType", "config.mediaType", "config.digest", "config.size",
				"layers.0.mediaType", "layers.0.digest", "layers.0.size"},
			map[string]any{"schemaVersion": 2.0, "config.mediaType": MediaTypeConfig, "layers.0.mediaType": MediaTypeLayer}},
		{"config", blob(img.ConfigDigest),
			[]string{"architecture", "os", "rootfs.type", "rootfs.diff_ids", "created", "config.Entrypoint", "config.User"},
			map[string]any{"architecture": "amd64", "os": "linux", "rootfs.type": "layers", "config.User": "65532:65532"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc any
			if err := json.Unmarshal(tt.data, &doc); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			for _, p := range tt.required {
				v, ok := lookup(doc, p)
				if !ok {
					t.Errorf("required field %s missing", p)
				}
				if strings.HasSuffix(p, "digest") && !digestRE.MatchString(v.(string)) {
					t.Errorf("%s = %v is not a sha256 digest", p, v)
				}
			}
			for p, want := range tt.equals {
				if v, _ := lookup(doc, p); v != want {
					t.Errorf("%s = %v, want %v", p, v, want)
				}
			}
		})
	}
}

// lookup follows a dotted path through decoded JSON; a numeric part
// indexes an array. Map keys may contain dots only as the last part.
func lookup(doc any, path string) (any, bool) {
	parts := strings.Split(path, ".")
	cur := doc
	for i, p := range parts {
		switch v := cur.(type) {
		case map[string]any:
			if next, ok := v[p]; ok {
				cur = next
				continue
			}
			next, ok := v[strings.Join(parts[i:], ".")] // an annotation key
			return next, ok
		case []any:
			if p != "0" || len(v) == 0 {
				return nil, false
			}
			cur = v[0]
		default:
			return nil, false
		}
	}
	return cur, true
}
