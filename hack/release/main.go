// Command release builds the operator image and the release files without a container runtime
// (internal/release); `make image` and `make release` run it:
//
//	go run ./hack/release image   -version V [-revision SHA] [-source-date-epoch S] [-platforms linux/amd64,...] -out bin/image
//	go run ./hack/release release -version V [-revision SHA] [-source-date-epoch S] -kustomize K -helm H -out bin/release
//
// image writes bin/image/kdag-image_linux_<arch>.tar (`docker load`, `kind load image-archive`,
// `crane push`) and the OCI layout bin/image/kdag-image_oci (`crane push bin/image/kdag-image_oci
// ghcr.io/...:V` pushes the multi-platform index). release writes what internal/release.Run lists.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/kdag-dev/kdag/internal/release"
)

func main() {
	err := run(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed, as every command does
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// run executes the command line args (without the program name).
func run(args []string) error {
	const usage = "usage: release image|release -version V [flags] (see go doc ./hack/release)"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Println(usage)
		return flag.ErrHelp
	}
	if len(args) == 0 || (args[0] != "image" && args[0] != "release") {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var (
		info      release.BuildInfo
		out       string
		epoch     int64
		platforms string
		kustomize string
		helm      string
	)
	fs.StringVar(&info.Version, "version", "", "operator version: the image tag, stamped into the binaries (required)")
	fs.StringVar(&info.Revision, "revision", "", "commit the release is built from (image label, chart version of a dev build)")
	fs.Int64Var(&epoch, "source-date-epoch", 0, "time written into the images, in seconds since the epoch (the commit time)")
	fs.StringVar(&out, "out", "", "output directory (required)")
	fs.StringVar(&platforms, "platforms", "", "image: comma-separated os/arch list (default linux/amd64,linux/arm64)")
	fs.StringVar(&kustomize, "kustomize", "", "release: path of the kustomize binary")
	fs.StringVar(&helm, "helm", "", "release: path of the helm binary")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if out == "" {
		return errors.New("-out is required")
	}
	info.Created = time.Unix(epoch, 0).UTC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	if args[0] == "image" {
		ps, err := parsePlatforms(platforms)
		if err != nil {
			return err
		}
		files, err := release.BuildImages(ctx, release.ImageBuild{BuildInfo: info, Dir: ".", Out: out, Platforms: ps, Log: os.Stderr})
		if err != nil {
			return err
		}
		fmt.Printf("%s\nin %s\n", strings.Join(files, "\n"), time.Since(start).Round(time.Second))
		return nil
	}
	if kustomize == "" || helm == "" {
		return errors.New("-kustomize and -helm are required")
	}
	files, err := release.Run(ctx, release.Options{
		BuildInfo: info, Dir: ".", Out: out, Kustomize: kustomize, Helm: helm, Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	fmt.Printf("%s:\n  %s\nin %s\n", out, strings.Join(files, "\n  "), time.Since(start).Round(time.Second))
	return nil
}

// parsePlatforms parses a comma-separated list of os/arch; empty means the default.
func parsePlatforms(s string) ([]release.Platform, error) {
	var ps []release.Platform
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		goos, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || arch == "" {
			return nil, errors.Errorf("platform %q: want os/arch", p)
		}
		ps = append(ps, release.Platform{OS: goos, Arch: arch})
	}
	return ps, nil
}
