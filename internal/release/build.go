package release

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"

	"github.com/pkg/errors"
)

// Platform is an operating system and an architecture, as GOOS and GOARCH name them.
type Platform struct {
	OS, Arch string
}

// String returns "os/arch".
func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ImagePlatforms returns the platforms the operator image is built for: linux/amd64, linux/arm64.
func ImagePlatforms() []Platform {
	return []Platform{{"linux", "amd64"}, {"linux", "arm64"}}
}

// PluginPlatforms returns the platforms kubectl-kdag is released for: linux and darwin, each on
// amd64 and arm64.
func PluginPlatforms() []Platform {
	return []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}
}

// GoBuild is one `go build` of a main package.
type GoBuild struct {
	// Dir is the directory go runs in: the module's root. Required.
	Dir string
	// Package is the main package, relative to Dir: "." (the manager) or "./cmd/kubectl-kdag".
	Package string
	// Platform is the target; cross-compiled with CGO_ENABLED=0. Required.
	Platform Platform
	// Version is stamped into main.version; required.
	Version string
	// Output is the binary's path.
	Output string
}

// LDFlags returns the linker flags of a release build of version: no symbol table and no DWARF
// (-s -w), and main.version set to version. The Makefile's `build` target uses the same -X.
func LDFlags(version string) string { return "-s -w -X main.version=" + version }

// Build runs `go build` for b: statically linked (CGO_ENABLED=0), -trimpath (no local paths, so
// the binary is the same on every machine), LDFlags(b.Version). It returns an error carrying go's
// output when the build fails.
func Build(ctx context.Context, b GoBuild) error {
	if err := CheckVersion(b.Version); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", LDFlags(b.Version), "-o", b.Output, b.Package)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+b.Platform.OS, "GOARCH="+b.Platform.Arch)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return errors.Wrapf(err, "go build %s for %s: %s", b.Package, b.Platform, strings.TrimSpace(out.String()))
	}
	return nil
}
