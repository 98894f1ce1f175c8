package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkg/errors"
	"sigs.k8s.io/yaml"
)

// ChartDir is the operator's Helm chart, relative to the repository root.
const ChartDir = "charts/kdag"

// InstallYAML returns the manifests that install the operator with `kubectl apply --server-side
// -f`: config/default under the repository root dir (the kdag-system Namespace, the CRDs, RBAC,
// the manager Deployment and its metrics Service), built by the kustomize binary at kustomize
// with the manager image set to ImageRepository:version, under a comment naming the version. It
// returns an error when version is not a valid tag or kustomize fails (with its output).
func InstallYAML(ctx context.Context, kustomize, dir, version string) ([]byte, error) {
	if err := CheckVersion(version); err != nil {
		return nil, err
	}
	base, err := filepath.Abs(filepath.Join(dir, "config", "default"))
	if err != nil {
		return nil, errors.Wrapf(err, "install.yaml: path of config/default in %s", dir)
	}
	// An overlay outside the repository, so the build changes no file in it.
	overlay, err := os.MkdirTemp("", "kdag-install-")
	if err != nil {
		return nil, errors.Wrap(err, "install.yaml: create overlay directory")
	}
	defer os.RemoveAll(overlay)
	rel, err := filepath.Rel(overlay, base) // kustomize refuses an absolute path
	if err != nil {
		return nil, errors.Wrapf(err, "install.yaml: path of %s from %s", base, overlay)
	}
	kustomization, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{filepath.ToSlash(rel)},
		"images":     []map[string]string{{"name": ImageRepository, "newTag": version}},
	})
	if err != nil {
		return nil, errors.Wrap(err, "install.yaml: marshal kustomization")
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), kustomization, 0o600); err != nil {
		return nil, errors.Wrap(err, "install.yaml: write kustomization")
	}
	out, err := run(ctx, "", kustomize, "build", overlay)
	if err != nil {
		return nil, errors.Wrap(err, "install.yaml")
	}
	header := fmt.Sprintf("# kdag %s: the CRDs, RBAC and the manager (image %s:%s).\n"+
		"# Install or upgrade: kubectl apply --server-side -f install.yaml\n", version, ImageRepository, version)
	return append([]byte(header), out...), nil
}

// PackageChart packages the chart ChartDir under the repository root dir into the directory out
// with the helm binary at helm, its version set to ChartVersion(info.Version, info.Revision) and
// its appVersion to info.Version, so that its default image is ImageRepository:info.Version. The
// package's file times are info.Created (helm writes the current time; the package is rewritten),
// so it is the same for the same commit. It returns the path of the package
// (out/kdag-<chart version>.tgz), or an error carrying helm's output.
func PackageChart(ctx context.Context, helm, dir, out string, info BuildInfo) (string, error) {
	if err := CheckVersion(info.Version); err != nil {
		return "", err
	}
	chartVersion := ChartVersion(info.Version, info.Revision)
	if _, err := run(ctx, dir, helm, "package", ChartDir, "--destination", out,
		"--version", chartVersion, "--app-version", info.Version); err != nil {
		return "", errors.Wrap(err, "package chart")
	}
	pkg := filepath.Join(out, "kdag-"+chartVersion+".tgz")
	return pkg, errors.Wrapf(retime(pkg, info.created()), "package chart: rewrite %s", pkg)
}

// retime rewrites the gzipped tar archive at file with every entry's modification time set to
// mtime and no time in the gzip header; names, modes and contents stay.
func retime(file string, mtime time.Time) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime, time.Time{}, time.Time{}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(file, out.Bytes(), 0o644)
}

// run runs bin with args in dir and returns its standard output, or an error with its output.
func run(ctx context.Context, dir, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.Wrapf(err, "%s %s: %s", filepath.Base(bin), strings.Join(args, " "),
			strings.TrimSpace(stderr.String()+"\n"+stdout.String()))
	}
	return stdout.Bytes(), nil
}
