package release

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/pkg/errors"
)

// What the operator image is. The Dockerfile at the repository root builds the same image with
// Docker; a test keeps its USER and ENTRYPOINT equal to these.
const (
	// ImageRepository is where the image is published; the chart's image.repository and
	// config/manager's image name default to it.
	ImageRepository = "ghcr.io/kdag-dev/kdag"
	// Entrypoint is the path of the manager binary in the image, and the image's entrypoint.
	Entrypoint = "/manager"
	// User is the image's user and group: distroless's "nonroot", so that runAsNonRoot holds
	// without a runAsUser in the pod.
	User = "65532:65532"
	// SourceURL is the org.opencontainers.image.source label.
	SourceURL = "https://github.com/kdag-dev/kdag"
)

// OCI annotation keys (github.com/opencontainers/image-spec annotations.md) set as image labels.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelLicenses = "org.opencontainers.image.licenses"
	// LabelRefName names the image index in an OCI layout's index.json (skopeo's oci:DIR:TAG).
	LabelRefName = "org.opencontainers.image.ref.name"
)

// Image returns the operator image for platform holding the manager binary read from binary (a
// static Go binary built for that platform): one layer with the binary at Entrypoint (mode 0755,
// owned by root), no base image, user User, entrypoint Entrypoint, OCI labels for source,
// version, revision, creation time, title and license, and OCI media types. It returns an error
// when the binary cannot be read or opts.Version is not a valid tag.
func Image(binary string, platform Platform, opts BuildInfo) (v1.Image, error) {
	if err := CheckVersion(opts.Version); err != nil {
		return nil, err
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, errors.Wrapf(err, "image %s: read manager binary", platform)
	}
	created := opts.created()
	layerTar, err := tarFiles([]tarFile{{name: Entrypoint[1:], mode: 0o755, content: content}}, created)
	if err != nil {
		return nil, errors.Wrapf(err, "image %s: write layer", platform)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, errors.Wrapf(err, "image %s: create layer", platform)
	}
	labels := map[string]string{
		LabelSource:   SourceURL,
		LabelVersion:  opts.Version,
		LabelCreated:  created.Format(time.RFC3339),
		LabelTitle:    "kdag",
		LabelLicenses: "Apache-2.0",
	}
	if opts.Revision != "" {
		labels[LabelRevision] = opts.Revision
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: platform.Arch,
		OS:           platform.OS,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{Entrypoint},
			User:       User,
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, errors.Wrapf(err, "image %s: set config", platform)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "kdag internal/release: COPY manager " + Entrypoint, Comment: opts.Version},
	})
	return img, errors.Wrapf(err, "image %s: add layer", platform)
}

// ImageArchiveName is the file name of the `docker load`-able tarball of platform's image.
func ImageArchiveName(p Platform) string { return "kdag-image_" + p.OS + "_" + p.Arch + ".tar" }

// ImageLayoutName is the name of the OCI image layout (a directory, or ImageLayoutName+".tar")
// holding the multi-platform index.
const ImageLayoutName = "kdag-image_oci"

// WriteImages writes images (one per platform, from Image) tagged ImageRepository:opts.Version
// into dir: one `docker load`-able tarball per platform (ImageArchiveName) and an OCI image layout
// whose index.json names (LabelRefName: the version) one OCI image index of every image, with
// each image's platform. The layout is the directory ImageLayoutName, or, with archiveLayout, a
// tar of it named ImageLayoutName+".tar" (no directory left behind). It returns the paths written,
// in that order, or an error naming the file that could not be written.
func WriteImages(dir string, images []v1.Image, opts BuildInfo, archiveLayout bool) ([]string, error) {
	tag, err := opts.Tag()
	if err != nil {
		return nil, err
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var written []string
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, errors.Wrap(err, "read image config")
		}
		p := cfg.Platform()
		if p == nil {
			return nil, errors.New("image config names no platform")
		}
		file := filepath.Join(dir, ImageArchiveName(Platform{OS: p.OS, Arch: p.Architecture}))
		if err := tarball.WriteToFile(file, tag, img); err != nil {
			return nil, errors.Wrapf(err, "write image tarball %s", file)
		}
		written = append(written, file)
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add:        index,
		Descriptor: v1.Descriptor{Annotations: map[string]string{LabelRefName: opts.Version}},
	})
	layoutDir := filepath.Join(dir, ImageLayoutName)
	if archiveLayout {
		if layoutDir, err = os.MkdirTemp(dir, ".layout-"); err != nil {
			return nil, errors.Wrapf(err, "create temporary directory in %s", dir)
		}
		defer os.RemoveAll(layoutDir)
	} else if err := os.RemoveAll(layoutDir); err != nil {
		return nil, errors.Wrapf(err, "remove previous OCI layout %s", layoutDir)
	}
	if _, err := layout.Write(layoutDir, top); err != nil {
		return nil, errors.Wrapf(err, "write OCI layout %s", layoutDir)
	}
	if !archiveLayout {
		return append(written, layoutDir), nil
	}
	file := filepath.Join(dir, ImageLayoutName+".tar")
	if err := tarDir(layoutDir, file, opts.created()); err != nil {
		return nil, err
	}
	return append(written, file), nil
}

// tarFile is a regular file in a tar archive.
type tarFile struct {
	name    string
	mode    int64
	content []byte
}

// tarFiles returns a tar archive of files, in order, each owned by root with modification time
// mtime.
func tarFiles(files []tarFile, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.content)),
			ModTime: mtime,
		}
		if err := w.WriteHeader(hdr); err != nil {
			return nil, errors.Wrapf(err, "tar header of %s", f.name)
		}
		if _, err := w.Write(f.content); err != nil {
			return nil, errors.Wrapf(err, "tar content of %s", f.name)
		}
	}
	if err := w.Close(); err != nil {
		return nil, errors.Wrap(err, "close tar")
	}
	return buf.Bytes(), nil
}

// tarDir writes the regular files under dir, in lexical order with paths relative to dir, into a
// tar archive at file, each owned by root, mode 0644, modified at mtime (so that the archive only
// depends on the content).
func tarDir(dir, file string, mtime time.Time) (err error) {
	out, err := os.Create(file)
	if err != nil {
		return errors.Wrapf(err, "create %s", file)
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = errors.Wrapf(cerr, "close %s", file)
		}
	}()
	w := tar.NewWriter(out)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: filepath.ToSlash(rel), Mode: 0o644, Size: info.Size(),
			ModTime: mtime,
		}
		if err := w.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		return errors.Wrapf(err, "write %s from %s", file, dir)
	}
	return errors.Wrapf(w.Close(), "close tar %s", file)
}
