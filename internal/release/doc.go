// Package release builds what a kdag release ships, with Go tooling only (no container runtime):
//
//   - the operator image: the statically linked manager as one layer on an empty base, user
//     65532, entrypoint the manager, OCI labels naming the source and the version (Image), written
//     as one `docker load`-able tarball per platform and an OCI image layout holding a
//     multi-platform index (WriteImages), built with github.com/google/go-containerregistry;
//   - the binaries: `go build` with CGO_ENABLED=0, -trimpath and the version stamped into
//     main.version (Build);
//   - install.yaml: config/default built by kustomize with the versioned image (InstallYAML);
//   - the Helm chart packaged with its version and appVersion set from the operator version
//     (PackageChart, ChartVersion);
//   - all of it, plus kubectl-kdag for linux and darwin and SHA256SUMS, in one directory (Run).
//
// `make image` and `make release` call it through hack/release. The operator never imports it.
//
// Versions: the operator version is `git describe --tags --dirty` ("v1.2.0", "v1.2.0-3-gabc1234"),
// or "dev" when no tag reaches the commit. It is the image tag, the chart's appVersion (so the
// chart's default image is the one built with it) and what `kdag --version` and
// `kubectl kdag --version` print. The chart's version must be SemVer 2: ChartVersion maps the
// operator version onto one ("dev" becomes "0.0.0-dev+<commit>").
//
// Usage:
//
//	files, err := release.Run(ctx, release.Options{
//		Dir: ".", Out: "bin/release", Version: "v1.2.0", Revision: commit,
//		Kustomize: "bin/kustomize", Helm: "bin/helm",
//	})
//
// Builds are reproducible: every time in the images (config, history, file times) and in the
// chart package is BuildInfo.Created, SOURCE_DATE_EPOCH in the Makefile (the commit time), and
// the binaries are built with -trimpath, so the same commit and Go version give the same files,
// the same digests and the same SHA256SUMS.
package release
