package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// tool returns the path of the pinned tool bin/<name> of the repository; it fails the test when
// it is missing (`make test` builds it first).
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(repoRoot, "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no %s at %s: `make test` (or `make tools-dev`) builds it: %v", name, path, err)
	}
	return path
}

// TestRun builds a whole release, as `make release` does, and checks every file as a user
// would use it: checksums, install.yaml, the chart, the images (the host's binary runs) and
// kubectl-kdag for each platform. It cross-compiles the manager twice and kubectl-kdag four
// times (about a minute with a warm build cache, a few more cold).
// TestRun builds a release for the host platform and one other (an image for linux/arm64 when
// the host is linux/amd64, and the other way round), so that make test on a fresh machine pays
// for two cross builds, not six; make release builds every platform of ImagePlatforms and
// PluginPlatforms with the same code (TestReleasePlatforms checks those lists).
func TestRun(t *testing.T) {
	const version, revision = "v0.4.0-2-gdeadbee", "deadbeef00112233445566778899aabbccddeeff"
	host := Platform{runtime.GOOS, runtime.GOARCH}
	other := Platform{"linux", "arm64"}
	if host == other {
		other = Platform{"linux", "amd64"}
	}
	images := []Platform{host, other}
	slices.SortFunc(images, func(a, b Platform) int { return strings.Compare(a.String(), b.String()) })
	opts := Options{
		BuildInfo:       BuildInfo{Version: version, Revision: revision, Created: testCreated},
		Dir:             repoRoot,
		Out:             filepath.Join(t.TempDir(), "release"),
		Kustomize:       tool(t, "kustomize"),
		Helm:            tool(t, "helm"),
		ImagePlatforms:  images,
		PluginPlatforms: []Platform{host},
	}
	start := time.Now()
	files, err := Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release built in %s", time.Since(start).Round(time.Second))
	chartVersion := "0.4.1-0.2.gdeadbee"
	wantFiles := []string{"install.yaml", "kdag-" + chartVersion + ".tgz"}
	for _, p := range images {
		wantFiles = append(wantFiles, ImageArchiveName(p))
	}
	wantFiles = append(wantFiles, "kdag-image_oci.tar", "kubectl-kdag_"+host.OS+"_"+host.Arch)
	slices.Sort(wantFiles)
	wantFiles = append(wantFiles, "SHA256SUMS")
	if !slices.Equal(files, wantFiles) {
		t.Errorf("files %q, want %q", files, wantFiles)
	}
	if entries, _ := os.ReadDir(opts.Out); len(entries) != len(wantFiles) {
		t.Errorf("%d entries in %s, want the %d files", len(entries), opts.Out, len(wantFiles))
	}
	image := ImageRepository + ":" + version
	path := func(name string) string { return filepath.Join(opts.Out, name) }

	t.Run("SHA256SUMS", func(t *testing.T) {
		var names []string
		sc := bufio.NewScanner(bytes.NewReader(readFile(t, path("SHA256SUMS"))))
		for sc.Scan() {
			sum, name, ok := strings.Cut(sc.Text(), "  ")
			if !ok {
				t.Fatalf("line %q is not `sha256sum` output", sc.Text())
			}
			if got, err := fileSHA256(path(name)); err != nil || got != sum {
				t.Errorf("%s: sha256 %s, %v; SHA256SUMS says %s", name, got, err, sum)
			}
			names = append(names, name)
		}
		if !slices.Equal(names, wantFiles[:len(wantFiles)-1]) {
			t.Errorf("SHA256SUMS lists %q, want %q", names, wantFiles[:len(wantFiles)-1])
		}
	})

	t.Run("install.yaml", func(t *testing.T) {
		raw := readFile(t, path("install.yaml"))
		if !bytes.HasPrefix(raw, []byte("# kdag "+version+":")) {
			t.Errorf("install.yaml does not start with a comment naming %s:\n%.200s", version, raw)
		}
		kinds := map[string]int{}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			var obj struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			kinds[obj.Kind]++
			if obj.Kind == "Deployment" {
				if got := deploymentImage(t, []byte(doc)); got != image {
					t.Errorf("install.yaml: manager image %q, want %q", got, image)
				}
			}
		}
		for kind, n := range map[string]int{
			"Namespace": 1, "CustomResourceDefinition": 4, "ServiceAccount": 1, "ClusterRole": 1,
			"ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 1,
		} {
			if kinds[kind] != n {
				t.Errorf("install.yaml has %d %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
			}
		}
	})

	t.Run("chart", func(t *testing.T) {
		pkg := path("kdag-" + chartVersion + ".tgz")
		var chart struct{ Version, AppVersion string }
		if err := yaml.Unmarshal(chartFile(t, pkg, "kdag/Chart.yaml"), &chart); err != nil {
			t.Fatal(err)
		}
		if chart.Version != chartVersion || chart.AppVersion != version {
			t.Errorf("packaged Chart.yaml version %q appVersion %q, want %q %q", chart.Version, chart.AppVersion, chartVersion, version)
		}
		// The chart installs the image the release holds.
		out, err := exec.CommandContext(t.Context(), opts.Helm, "template", "t", pkg, "--show-only", "templates/deployment.yaml").CombinedOutput()
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		if got := deploymentImage(t, out); got != image {
			t.Errorf("the packaged chart's image %q, want %q", got, image)
		}
	})

	t.Run("images", func(t *testing.T) {
		tag, err := name.NewTag(image)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range opts.ImagePlatforms {
			img, err := tarball.ImageFromPath(path(ImageArchiveName(p)), &tag)
			if err != nil {
				t.Fatalf("%s tagged %s: %v", ImageArchiveName(p), tag, err)
			}
			checkConfig(t, img, p, opts.BuildInfo)
			manager := layerFiles(t, img)["manager"]
			if manager == nil {
				t.Fatalf("%s: no manager in the layer", ImageArchiveName(p))
			}
			binary := filepath.Join(t.TempDir(), "manager")
			if err := os.WriteFile(binary, manager.content, 0o755); err != nil {
				t.Fatal(err)
			}
			checkBinary(t, binary, p)
			if p.OS != runtime.GOOS || p.Arch != runtime.GOARCH {
				continue
			}
			out, err := exec.CommandContext(t.Context(), binary, "--version").CombinedOutput()
			if err != nil || string(out) != "kdag "+version+"\n" {
				t.Errorf("the image's /manager --version: %q, %v; want %q", out, err, "kdag "+version+"\n")
			}
		}
	})

	t.Run("OCI layout", func(t *testing.T) {
		dir := t.TempDir()
		untar(t, path(ImageLayoutName+".tar"), dir)
		top, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := top.IndexManifest()
		if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Annotations[LabelRefName] != version {
			t.Fatalf("index.json %+v, %v; want one index named %s", m, err, version)
		}
		index, err := top.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		im, err := index.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []Platform
		for _, d := range im.Manifests {
			platforms = append(platforms, Platform{d.Platform.OS, d.Platform.Architecture})
			img, err := index.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkConfig(t, img, platforms[len(platforms)-1], opts.BuildInfo)
		}
		if !slices.Equal(platforms, opts.ImagePlatforms) {
			t.Errorf("the index's platforms %v, want %v", platforms, opts.ImagePlatforms)
		}
	})

	t.Run("kubectl-kdag", func(t *testing.T) {
		for _, p := range opts.PluginPlatforms {
			binary := path(PluginName(p))
			checkBinary(t, binary, p)
			if p.OS != runtime.GOOS || p.Arch != runtime.GOARCH {
				continue
			}
			out, err := exec.CommandContext(t.Context(), binary, "--version").CombinedOutput()
			if err != nil || string(out) != "kubectl-kdag "+version+"\n" {
				t.Errorf("%s --version: %q, %v; want %q", PluginName(p), out, err, "kubectl-kdag "+version+"\n")
			}
		}
	})

	t.Run("a second release into the same directory fails", func(t *testing.T) {
		if _, err := Run(t.Context(), opts); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Errorf("Run into a full directory: %v, want a \"not empty\" error", err)
		}
	})
}

// checkBinary fails the test unless the file at path is an executable for p, statically linked
// when it is for Linux.
func checkBinary(t *testing.T, path string, p Platform) {
	t.Helper()
	switch p.OS {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer f.Close()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch]
		if f.Machine != want || f.Type != elf.ET_EXEC {
			t.Errorf("%s: ELF %s %s, want a static %s executable", filepath.Base(path), f.Machine, f.Type, want)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s: dynamically linked (has an interpreter)", filepath.Base(path))
			}
		}
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer f.Close()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]
		if f.Cpu != want || f.Type != macho.TypeExec {
			t.Errorf("%s: Mach-O %s %s, want a %s executable", filepath.Base(path), f.Cpu, f.Type, want)
		}
	default:
		t.Fatalf("no check for %s binaries", p.OS)
	}
}

// deploymentImage returns the image of the first container of the Deployment in manifest.
func deploymentImage(t *testing.T, manifest []byte) string {
	t.Helper()
	var d appsv1.Deployment
	if err := yaml.Unmarshal(manifest, &d); err != nil || len(d.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("not a Deployment with a container (%v):\n%s", err, manifest)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// chartFile returns the content of the file name in the chart package pkg.
func chartFile(t *testing.T, pkg, name string) []byte {
	t.Helper()
	f, err := os.Open(pkg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	r := tar.NewReader(gz)
	for {
		hdr, err := r.Next()
		if err != nil {
			t.Fatalf("%s in %s: %v", name, pkg, err)
		}
		if hdr.Name == name {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// untar extracts the regular files of the tar archive at file into dir.
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := tar.NewReader(f)
	for {
		hdr, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) || hdr.Typeflag != tar.TypeReg {
			t.Fatalf("%s: unexpected entry %q", file, hdr.Name)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackageChart_Reproducible packages the chart twice: the packages are byte for byte the
// same, whatever time helm ran at; another creation time changes them.
func TestPackageChart_Reproducible(t *testing.T) {
	helm := tool(t, "helm")
	info := BuildInfo{Version: "v1.0.0", Revision: "abc1234", Created: testCreated}
	pkg := func(info BuildInfo) []byte {
		path, err := PackageChart(t.Context(), helm, repoRoot, t.TempDir(), info)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(path) != "kdag-1.0.0.tgz" {
			t.Errorf("package %s, want kdag-1.0.0.tgz", filepath.Base(path))
		}
		return readFile(t, path)
	}
	first := pkg(info)
	time.Sleep(1100 * time.Millisecond) // helm writes the current time, in seconds
	if !bytes.Equal(first, pkg(info)) {
		t.Error("two packages of the same chart and version differ")
	}
	info.Created = info.Created.Add(time.Hour)
	if bytes.Equal(first, pkg(info)) {
		t.Error("the package does not change with the creation time")
	}
}

// TestReleasePlatforms: make release builds the image for linux on amd64 and arm64, and
// kubectl-kdag for linux and darwin on both.
func TestReleasePlatforms(t *testing.T) {
	if got, want := ImagePlatforms(), []Platform{{"linux", "amd64"}, {"linux", "arm64"}}; !slices.Equal(got, want) {
		t.Errorf("ImagePlatforms() = %v, want %v", got, want)
	}
	want := []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}
	if got := PluginPlatforms(); !slices.Equal(got, want) {
		t.Errorf("PluginPlatforms() = %v, want %v", got, want)
	}
}
