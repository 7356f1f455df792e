// Command ociimage is the thin front of internal/ociimage that
// hack/image.sh calls. It has two subcommands:
//
//	ociimage build --layer DIR [--layer DIR ...] --name REPO --tag TAG --out FILE ...
//	ociimage sbom  --image REF --pier-bin FILE [--dpkg-status FILE] --out FILE ...
//
// build writes an OCI image archive and prints key=value facts about it
// on stdout (digest, sizes); sbom writes an SPDX 2.3 JSON document.
// Both take their timestamps from --epoch (SOURCE_DATE_EPOCH by default),
// never from the clock, so their output is reproducible.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"pier.dev/pier/internal/ociimage"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: ociimage build|sbom [flags]")
	}
	switch args[0] {
	case "build":
		return build(args[1:], stdout, stderr)
	case "sbom":
		return sbom(args[1:], stderr)
	default:
		return fmt.Errorf("unknown subcommand %q (want build or sbom)", args[0])
	}
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// epochFlag defaults to $SOURCE_DATE_EPOCH, so callers rarely pass it.
func epochFlag(fs *flag.FlagSet) *int64 {
	def, _ := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	return fs.Int64("epoch", def, "timestamp for mtimes and created fields, seconds since 1970 (default $SOURCE_DATE_EPOCH)")
}

// jsonList parses a JSON array of strings such as `["/pause"]`; "" is nil.
func jsonList(name, v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("--%s wants a JSON array of strings: %w", name, err)
	}
	return out, nil
}

// labels turns K=V flags into a map.
func labels(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not KEY=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
}

// buildFlags holds the build subcommand's flags.
type buildFlags struct {
	layers, comments, env, labels list
	name, tag, arch, out, layout  string
	entrypoint, cmd, user, workd  string
	stopSignal                    string
	epoch                         *int64
}

func parseBuild(args []string) (*buildFlags, error) {
	f := &buildFlags{}
	fs := flag.NewFlagSet("ociimage build", flag.ContinueOnError)
	fs.Var(&f.layers, "layer", "folder whose tree becomes a layer (repeat; bottom layer first)")
	fs.Var(&f.comments, "layer-comment", "history line of the layer given in the same position (repeat)")
	fs.Var(&f.env, "env", "KEY=VALUE for the config's Env (repeat)")
	fs.Var(&f.labels, "label", "KEY=VALUE for the config's Labels (repeat)")
	fs.StringVar(&f.name, "name", "docker.io/library/pier", "repository part of the image name")
	fs.StringVar(&f.tag, "tag", "dev", "tag part of the image name")
	fs.StringVar(&f.arch, "arch", runtime.GOARCH, "image architecture (GOARCH spelling)")
	fs.StringVar(&f.out, "out", "", "archive to write (required)")
	fs.StringVar(&f.layout, "layout", "", "folder for the layout's blobs (default: a temporary one beside --out, removed after)")
	fs.StringVar(&f.entrypoint, "entrypoint", "", `entrypoint as a JSON array, e.g. '["/usr/local/bin/pier"]'`)
	fs.StringVar(&f.cmd, "cmd", "", `default arguments as a JSON array, e.g. '["agent"]'`)
	fs.StringVar(&f.user, "user", "", `user to run as, e.g. "65532:65532" (default root)`)
	fs.StringVar(&f.workd, "workdir", "", "working directory")
	fs.StringVar(&f.stopSignal, "stop-signal", "", "signal that stops the container, e.g. SIGTERM")
	f.epoch = epochFlag(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.out == "" || len(f.layers) == 0 {
		return nil, errors.New("build needs --out and at least one --layer")
	}
	return f, nil
}

// spec turns the flags into an ociimage.Spec.
func (f *buildFlags) spec() (ociimage.Spec, error) {
	entrypoint, err := jsonList("entrypoint", f.entrypoint)
	if err != nil {
		return ociimage.Spec{}, err
	}
	cmd, err := jsonList("cmd", f.cmd)
	if err != nil {
		return ociimage.Spec{}, err
	}
	lbls, err := labels(f.labels)
	if err != nil {
		return ociimage.Spec{}, err
	}
	return ociimage.Spec{
		Name: f.name, Tag: f.tag, Architecture: f.arch, Created: time.Unix(*f.epoch, 0).UTC(),
		Container: ociimage.ContainerConfig{
			User: f.user, Env: f.env, Entrypoint: entrypoint, Cmd: cmd,
			WorkingDir: f.workd, Labels: lbls, StopSignal: f.stopSignal,
		},
	}, nil
}

func build(args []string, stdout, stderr io.Writer) error {
	f, err := parseBuild(args)
	if err != nil {
		return err
	}
	spec, err := f.spec()
	if err != nil {
		return err
	}
	layout := f.layout
	if layout == "" {
		if layout, err = os.MkdirTemp(filepath.Dir(f.out), ".layout-"); err != nil {
			return fmt.Errorf("create layout folder: %w", err)
		}
		defer os.RemoveAll(layout)
	}
	img, err := ociimage.Build(layout, spec, f.layers, f.comments)
	if err != nil {
		return err
	}
	if err := img.WriteArchive(layout, f.out); err != nil {
		return err
	}
	for i, l := range img.Layers {
		fmt.Fprintf(stderr, "ociimage: layer %d %s: %d entries (%d device/fifo/socket skipped), %d bytes, %d uncompressed\n",
			i, l.Digest, l.Entries, l.Skipped, l.Size, l.UncompressedSize)
	}
	fmt.Fprintf(stdout, "reference=%s\ndigest=%s\nconfig=%s\ncompressed=%d\nuncompressed=%d\narchive=%s\n",
		img.Reference(), img.ManifestDigest, img.ConfigDigest, img.CompressedSize(), img.UncompressedSize(), f.out)
	return nil
}

func sbom(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ociimage sbom", flag.ContinueOnError)
	image := fs.String("image", "", "image name the SBOM describes (required)")
	status := fs.String("dpkg-status", "", "the rootfs' /var/lib/dpkg/status, if it has Debian packages")
	distro := fs.String("distro", "", `purl distro qualifier for the Debian packages, e.g. "debian-13"`)
	pierBin := fs.String("pier-bin", "", "the pier binary (required)")
	pierVersion := fs.String("pier-version", "dev", "pier's version")
	component := fs.String("component", "pier", "package name of the --pier-bin binary in the SBOM")
	license := fs.String("license", "", "pier's SPDX license expression (default NOASSERTION)")
	source := fs.String("source", "", "where pier's source lives")
	out := fs.String("out", "", "SPDX JSON file to write (required)")
	epoch := epochFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *image == "" || *pierBin == "" || *out == "" {
		return errors.New("sbom needs --image, --pier-bin and --out")
	}
	in := ociimage.SBOMInput{Image: *image, Created: time.Unix(*epoch, 0).UTC(), Distro: *distro,
		License: *license, SourceRepo: *source, Component: *component}
	var err error
	if *status != "" {
		if in.Debs, err = readStatus(*status); err != nil {
			return err
		}
	}
	if in.Pier, err = ociimage.ReadGoBinary(*pierBin, *pierVersion); err != nil {
		return err
	}
	doc, err := ociimage.NewSBOM(in)
	if err != nil {
		return err
	}
	data, err := ociimage.MarshalSBOM(doc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return fmt.Errorf("write SBOM: %w", err)
	}
	fmt.Fprintf(stderr, "ociimage: SBOM %s: %d packages\n", *out, len(doc.Packages))
	return nil
}

func readStatus(path string) ([]ociimage.DebPackage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open dpkg status: %w", err)
	}
	defer f.Close()
	return ociimage.ParseDpkgStatus(f)
}
