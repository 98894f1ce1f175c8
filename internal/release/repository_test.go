package release

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoRoot is the repository, relative to this package.
const repoRoot = "../.."

// dockerfileStage is the final stage of a Dockerfile: its base and the instructions that decide
// what the image runs.
type dockerfileStage struct {
	from       string
	user       string
	entrypoint []string
	copies     []string // "COPY" arguments
}

// parseDockerfile returns the final stage of the Dockerfile in content: instructions joined over
// line continuations, comments skipped.
func parseDockerfile(t *testing.T, content string) (dockerfileStage, string) {
	t.Helper()
	var stage dockerfileStage
	var all strings.Builder
	joined := strings.ReplaceAll(content, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		all.WriteString(line + "\n")
		instruction, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instruction) {
		case "FROM":
			stage = dockerfileStage{from: strings.Fields(args)[0]}
		case "USER":
			stage.user = args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &stage.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s is not the exec (JSON) form: %v", args, err)
			}
		case "COPY":
			stage.copies = append(stage.copies, args)
		}
	}
	return stage, all.String()
}

// TestDockerfile_MatchesImage keeps the Dockerfile equivalent to the image Image builds: same
// user, entrypoint and binary path, a distroless static non-root base, the same link flags.
func TestDockerfile_MatchesImage(t *testing.T) {
	content, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stage, instructions := parseDockerfile(t, string(content))
	if stage.from != "gcr.io/distroless/static:nonroot" {
		t.Errorf("final stage FROM %s, want gcr.io/distroless/static:nonroot", stage.from)
	}
	if stage.user != User {
		t.Errorf("USER %q, want %q as the Go-built image", stage.user, User)
	}
	if !slices.Equal(stage.entrypoint, []string{Entrypoint}) {
		t.Errorf("ENTRYPOINT %q, want [%q] as the Go-built image", stage.entrypoint, Entrypoint)
	}
	if len(stage.copies) != 1 || !strings.HasSuffix(stage.copies[0], " "+Entrypoint) {
		t.Errorf("final stage COPY %q, want one COPY of the manager to %s", stage.copies, Entrypoint)
	}
	if !strings.Contains(instructions, "CGO_ENABLED=0") || !strings.Contains(instructions, `-ldflags "`+LDFlags("${VERSION}")+`"`) {
		t.Errorf("the Dockerfile's go build is not static with -ldflags %q:\n%s", LDFlags("${VERSION}"), instructions)
	}
	if !strings.Contains(instructions, LabelSource+`="`+SourceURL+`"`) {
		t.Errorf("the Dockerfile has no %s label %s", LabelSource, SourceURL)
	}
}

// TestRepository_DevDefaults checks that the chart and the kustomize manifests in the
// repository install the image `make image` builds from a checkout: ImageRepository:dev.
func TestRepository_DevDefaults(t *testing.T) {
	var chart struct{ Version, AppVersion string }
	readYAML(t, "charts/kdag/Chart.yaml", &chart)
	if chart.AppVersion != DevVersion || chart.Version != ChartVersion(DevVersion, "") {
		t.Errorf("charts/kdag/Chart.yaml version %q appVersion %q, want %q %q",
			chart.Version, chart.AppVersion, ChartVersion(DevVersion, ""), DevVersion)
	}
	var values struct {
		Image struct{ Repository, Tag string }
	}
	readYAML(t, "charts/kdag/values.yaml", &values)
	if values.Image.Repository != ImageRepository || values.Image.Tag != "" {
		t.Errorf("charts/kdag/values.yaml image %+v, want repository %s and no tag (appVersion)", values.Image, ImageRepository)
	}
	var kustomization struct {
		Images []struct{ Name, NewName, NewTag string } `json:"images"`
	}
	readYAML(t, "config/manager/kustomization.yaml", &kustomization)
	if len(kustomization.Images) != 1 || kustomization.Images[0].NewName != ImageRepository || kustomization.Images[0].NewTag != DevVersion {
		t.Errorf("config/manager/kustomization.yaml images %+v, want %s:%s", kustomization.Images, ImageRepository, DevVersion)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
