package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/pkg/errors"
)

// Release file names, in the output directory of Run.
const (
	InstallYAMLName = "install.yaml"
	ChecksumsName   = "SHA256SUMS"
)

// PluginName is the file name of the kubectl-kdag binary for p.
func PluginName(p Platform) string { return "kubectl-kdag_" + p.OS + "_" + p.Arch }

// ImageBuild is the build of the operator image for several platforms.
type ImageBuild struct {
	BuildInfo
	// Dir is the repository root, where the manager is built. Required.
	Dir string
	// Out is the directory the images are written to (WriteImages); created if missing.
	Out string
	// Platforms are the image's platforms; empty means ImagePlatforms().
	Platforms []Platform
	// ArchiveLayout writes the OCI layout as a tar instead of a directory (see WriteImages).
	ArchiveLayout bool
	// Log receives a line per step; nil discards them.
	Log io.Writer
}

// BuildImages builds the manager for each of b.Platforms (Build), the image of each (Image) and
// writes them into b.Out (WriteImages). It returns the paths written, or the first error.
func BuildImages(ctx context.Context, b ImageBuild) ([]string, error) {
	if len(b.Platforms) == 0 {
		b.Platforms = ImagePlatforms()
	}
	log := logger(b.Log)
	if err := os.MkdirAll(b.Out, 0o755); err != nil {
		return nil, errors.Wrapf(err, "create image directory %s", b.Out)
	}
	binDir, err := os.MkdirTemp("", "kdag-manager-")
	if err != nil {
		return nil, errors.Wrap(err, "create build directory")
	}
	defer os.RemoveAll(binDir)
	images := make([]v1.Image, 0, len(b.Platforms))
	for _, p := range b.Platforms {
		start := time.Now()
		binary := filepath.Join(binDir, "manager_"+p.OS+"_"+p.Arch)
		if err := Build(ctx, GoBuild{Dir: b.Dir, Package: ".", Platform: p, Version: b.Version, Output: binary}); err != nil {
			return nil, err
		}
		img, err := Image(binary, p, b.BuildInfo)
		if err != nil {
			return nil, err
		}
		images = append(images, img)
		log("built the manager %s for %s (%s)", b.Version, p, since(start))
	}
	start := time.Now()
	files, err := WriteImages(b.Out, images, b.BuildInfo, b.ArchiveLayout)
	if err != nil {
		return nil, err
	}
	tag, _ := b.Tag()
	log("wrote the images of %s (%s)", tag, since(start))
	return files, nil
}

// Options describe a release.
type Options struct {
	BuildInfo
	// Dir is the repository root. Required.
	Dir string
	// Out is the release directory. It is created and must not hold anything yet, so that
	// SHA256SUMS lists this release's files only.
	Out string
	// Kustomize and Helm are the paths of the pinned tools (bin/kustomize-*, bin/helm-*). Required.
	Kustomize, Helm string
	// ImagePlatforms are the operator image's platforms; empty means ImagePlatforms().
	ImagePlatforms []Platform
	// PluginPlatforms are kubectl-kdag's platforms; empty means PluginPlatforms().
	PluginPlatforms []Platform
	// Log receives a line per step; nil discards them.
	Log io.Writer
}

// Run writes a release of the repository at opts.Dir into opts.Out:
//
//	install.yaml                      InstallYAML
//	kdag-<chart version>.tgz          PackageChart
//	kdag-image_linux_<arch>.tar       per platform, `docker load` / `kind load image-archive`
//	kdag-image_oci.tar                OCI layout with the multi-platform index
//	kubectl-kdag_<os>_<arch>          per platform
//	SHA256SUMS                        `sha256sum -c SHA256SUMS` checks the files above
//
// It returns the names of the files written (relative to opts.Out, sorted, SHA256SUMS last), or
// an error naming the step that failed; opts.Out then holds what was written before it.
func Run(ctx context.Context, opts Options) ([]string, error) {
	if err := CheckVersion(opts.Version); err != nil {
		return nil, err
	}
	if len(opts.PluginPlatforms) == 0 {
		opts.PluginPlatforms = PluginPlatforms()
	}
	log := logger(opts.Log)
	if entries, err := os.ReadDir(opts.Out); err == nil && len(entries) > 0 {
		return nil, errors.Errorf("release directory %s is not empty: remove it first", opts.Out)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, errors.Wrapf(err, "create release directory %s", opts.Out)
	}

	install, err := InstallYAML(ctx, opts.Kustomize, opts.Dir, opts.Version)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, InstallYAMLName), install, 0o644); err != nil {
		return nil, errors.Wrapf(err, "write %s", InstallYAMLName)
	}
	log("wrote %s", InstallYAMLName)
	chart, err := PackageChart(ctx, opts.Helm, opts.Dir, opts.Out, opts.BuildInfo)
	if err != nil {
		return nil, err
	}
	log("packaged the chart %s", filepath.Base(chart))

	if _, err := BuildImages(ctx, ImageBuild{
		BuildInfo: opts.BuildInfo, Dir: opts.Dir, Out: opts.Out, Platforms: opts.ImagePlatforms,
		ArchiveLayout: true, Log: opts.Log,
	}); err != nil {
		return nil, err
	}
	for _, p := range opts.PluginPlatforms {
		start := time.Now()
		if err := Build(ctx, GoBuild{
			Dir: opts.Dir, Package: "./cmd/kubectl-kdag", Platform: p, Version: opts.Version,
			Output: filepath.Join(opts.Out, PluginName(p)),
		}); err != nil {
			return nil, err
		}
		log("built kubectl-kdag %s for %s (%s)", opts.Version, p, since(start))
	}
	files, err := writeChecksums(opts.Out)
	if err != nil {
		return nil, err
	}
	log("wrote %s: %d files", ChecksumsName, len(files)-1)
	return files, nil
}

// writeChecksums writes ChecksumsName in dir, in `sha256sum` format, for every regular file in
// dir, and returns their names, sorted, with ChecksumsName last.
func writeChecksums(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, errors.Wrapf(err, "list %s", dir)
	}
	var names []string
	var sums []byte
	for _, e := range entries { // sorted by name
		if !e.Type().IsRegular() || e.Name() == ChecksumsName {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sums = fmt.Appendf(sums, "%s  %s\n", sum, e.Name())
		names = append(names, e.Name())
	}
	if err := os.WriteFile(filepath.Join(dir, ChecksumsName), sums, 0o644); err != nil {
		return nil, errors.Wrapf(err, "write %s", ChecksumsName)
	}
	return slices.Concat(names, []string{ChecksumsName}), nil
}

// fileSHA256 returns the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", errors.Wrapf(err, "checksum of %s", path)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", errors.Wrapf(err, "checksum of %s", path)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// logger returns a printf-like function writing "==> " lines to w, or nothing when w is nil.
func logger(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, "==> "+format+"\n", args...)
		}
	}
}

func since(start time.Time) time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
