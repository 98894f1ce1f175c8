package release

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testCreated = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)

// fakeBinary writes a file standing for the manager built for p and returns its path and content.
func fakeBinary(t *testing.T, p Platform) (string, []byte) {
	t.Helper()
	content := []byte("\x7fELF manager for " + p.String())
	path := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(path, content, 0o755); err != nil {
		t.Fatal(err)
	}
	return path, content
}

// checkConfig fails the test unless img is the operator image for p with opts: user,
// entrypoint, labels, platform, times, OCI media types.
func checkConfig(t *testing.T, img v1.Image, p Platform, opts BuildInfo) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Arch {
		t.Errorf("platform %s/%s, want %s", cfg.OS, cfg.Architecture, p)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/manager] and no cmd", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/kdag-dev/kdag",
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.created":  opts.created().Format(time.RFC3339),
		"org.opencontainers.image.title":    "kdag",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if opts.Revision != "" {
		wantLabels["org.opencontainers.image.revision"] = opts.Revision
	}
	for k, want := range wantLabels {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if len(cfg.Config.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want %v", cfg.Config.Labels, wantLabels)
	}
	if !cfg.Created.Equal(opts.created()) {
		t.Errorf("created %s, want %s", cfg.Created, opts.created())
	}
	if len(cfg.History) != 1 || !cfg.History[0].Created.Equal(opts.created()) {
		t.Errorf("history %+v, want one entry created at %s", cfg.History, opts.created())
	}
}

// layerFiles returns the files of img's only layer: name to content and mode; it fails the test
// when img has another number of layers.
func layerFiles(t *testing.T, img v1.Image) map[string]*tarEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (no base image)", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tarEntry{}
	r := tar.NewReader(rc)
	for {
		hdr, err := r.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = &tarEntry{hdr: hdr, content: content}
	}
}

type tarEntry struct {
	hdr     *tar.Header
	content []byte
}

func TestImage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		platform Platform
		opts     BuildInfo
	}{
		{"release", Platform{"linux", "amd64"}, BuildInfo{Version: "v1.2.0", Revision: "0123456789abcdef", Created: testCreated}},
		{"arm64", Platform{"linux", "arm64"}, BuildInfo{Version: "v1.2.0-3-gabc1234", Created: testCreated}},
		{"no time: the epoch", Platform{"linux", "amd64"}, BuildInfo{Version: DevVersion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			binary, content := fakeBinary(t, tc.platform)
			img, err := Image(binary, tc.platform, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkConfig(t, img, tc.platform, tc.opts)
			if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
				t.Errorf("manifest media type %s, %v; want %s", mt, err, types.OCIManifestSchema1)
			}
			files := layerFiles(t, img)
			manager := files["manager"]
			if len(files) != 1 || manager == nil {
				t.Fatalf("layer holds %v, want the manager only", slices.Collect(maps.Keys(files)))
			}
			if !bytes.Equal(manager.content, content) || manager.hdr.Mode != 0o755 || manager.hdr.Uid != 0 ||
				!manager.hdr.ModTime.Equal(tc.opts.created()) {
				t.Errorf("manager in the layer: mode %o uid %d mtime %s, content equal %v; want 755, 0, %s, true",
					manager.hdr.Mode, manager.hdr.Uid, manager.hdr.ModTime, bytes.Equal(manager.content, content), tc.opts.created())
			}
		})
	}
}

func TestImage_Errors(t *testing.T) {
	binary, _ := fakeBinary(t, Platform{"linux", "amd64"})
	if _, err := Image(binary, Platform{"linux", "amd64"}, BuildInfo{Version: "not a tag"}); err == nil {
		t.Error("Image with version \"not a tag\": no error")
	}
	if _, err := Image(filepath.Join(t.TempDir(), "absent"), Platform{"linux", "amd64"}, BuildInfo{Version: "v1"}); err == nil {
		t.Error("Image of a missing binary: no error")
	}
}

// writeTestImages writes the images of fake binaries for ImagePlatforms() into a new directory
// and returns it, the images and the files written.
func writeTestImages(t *testing.T, opts BuildInfo, archiveLayout bool) (string, []v1.Image, []string) {
	t.Helper()
	var images []v1.Image
	for _, p := range ImagePlatforms() {
		binary, _ := fakeBinary(t, p)
		img, err := Image(binary, p, opts)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	dir := t.TempDir()
	files, err := WriteImages(dir, images, opts, archiveLayout)
	if err != nil {
		t.Fatal(err)
	}
	return dir, images, files
}

// TestWriteImages_ReadBack reads what WriteImages wrote as docker and crane would: each
// platform's tarball tagged with the version, and the OCI layout's index of every platform.
func TestWriteImages_ReadBack(t *testing.T) {
	opts := BuildInfo{Version: "v0.3.0", Revision: "feedface", Created: testCreated}
	dir, images, files := writeTestImages(t, opts, false)
	want := []string{
		filepath.Join(dir, "kdag-image_linux_amd64.tar"), filepath.Join(dir, "kdag-image_linux_arm64.tar"),
		filepath.Join(dir, "kdag-image_oci"),
	}
	if !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
	tag := name.MustParseReference("ghcr.io/kdag-dev/kdag:v0.3.0").(name.Tag)
	for i, p := range ImagePlatforms() {
		archive := filepath.Join(dir, ImageArchiveName(p))
		manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(archive) })
		if err != nil {
			t.Fatal(err)
		}
		if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{tag.String()}) {
			t.Errorf("%s: manifest.json %+v, want one image tagged %s", archive, manifest, tag)
		}
		img, err := tarball.ImageFromPath(archive, &tag)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, img, p, opts)
		if got, want := configName(t, img), configName(t, images[i]); got != want {
			t.Errorf("%s: config %s, want %s", archive, got, want)
		}
	}

	index, err := layout.ImageIndexFromPath(filepath.Join(dir, ImageLayoutName))
	if err != nil {
		t.Fatal(err)
	}
	top, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != types.OCIImageIndex ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.3.0" {
		t.Fatalf("index.json %+v, want one image index named v0.3.0", top)
	}
	multi, err := index.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != len(images) {
		t.Fatalf("the image index has %d manifests, want %d", len(m.Manifests), len(images))
	}
	for i, p := range ImagePlatforms() {
		d := m.Manifests[i]
		wantDigest, err := images[i].Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d.Platform == nil || d.Platform.OS != p.OS || d.Platform.Architecture != p.Arch || d.Digest != wantDigest {
			t.Errorf("index entry %d: platform %+v digest %s, want %s %s", i, d.Platform, d.Digest, p, wantDigest)
		}
		img, err := multi.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, img, p, opts)
	}
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestWriteImages_Reproducible writes the same images twice: the files are byte for byte the
// same; another creation time changes them.
func TestWriteImages_Reproducible(t *testing.T) {
	opts := BuildInfo{Version: "v0.3.0", Revision: "feedface", Created: testCreated}
	dirA, _, filesA := writeTestImages(t, opts, true)
	_, _, filesB := writeTestImages(t, opts, true)
	opts.Created = opts.Created.Add(time.Second)
	dirC, _, _ := writeTestImages(t, opts, true)
	if len(filesA) != 3 || filepath.Base(filesA[2]) != "kdag-image_oci.tar" {
		t.Fatalf("files %q, want two image tarballs and kdag-image_oci.tar", filesA)
	}
	if entries, _ := os.ReadDir(dirA); len(entries) != 3 {
		t.Errorf("%d entries in the directory, want the 3 files only (no layout directory left)", len(entries))
	}
	for i := range filesA {
		a, b, c := readFile(t, filesA[i]), readFile(t, filesB[i]), readFile(t, filepath.Join(dirC, filepath.Base(filesA[i])))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds of the same binaries", filepath.Base(filesA[i]))
		}
		if bytes.Equal(a, c) {
			t.Errorf("%s is the same with another creation time", filepath.Base(filesA[i]))
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
