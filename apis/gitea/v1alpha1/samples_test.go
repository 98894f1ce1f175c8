package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

// Every valid sample is accepted as written, with strict field validation, and decodes strictly
// into the Go types (so the JSON names of the types and the samples agree).
func TestValidSamples(t *testing.T) {
	for _, path := range sampleFiles(t, samplesDir) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			ctx := context.Background()
			for _, obj := range readDocuments(t, path) {
				if obj.GroupVersionKind().Group == v1alpha1.GroupName {
					raw, err := yaml.Marshal(obj.Object)
					if err != nil {
						t.Fatal(err)
					}
					if err := yaml.UnmarshalStrict(raw, &v1alpha1.Gitea{}); err != nil {
						t.Errorf("%s %s does not decode strictly into v1alpha1.Gitea: %v", obj.GetKind(), obj.GetName(), err)
					}
				}
				obj.SetNamespace(ns)
				if err := env.Client.Create(ctx, obj, strict); err != nil {
					t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}
}

// Every file of config/samples/invalid is refused with its `# expect:` text. All documents but
// the last are set-up steps that must succeed; the last must be refused (see the README there).
func TestInvalidSamples(t *testing.T) {
	files := sampleFiles(t, filepath.Join(samplesDir, "invalid"))
	if len(files) < 8 {
		t.Fatalf("want at least 8 invalid samples, have %d", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			t.Parallel()
			want := expectation(t, path)
			ns := env.Namespace(t)
			ctx := context.Background()
			docs := readDocuments(t, path)
			for i, obj := range docs {
				if obj.GetKind() != v1alpha1.GiteaKind {
					t.Fatalf("document %d is a %s: invalid samples are Gitea manifests", i+1, obj.GetKind())
				}
				obj.SetNamespace(ns)
				err := createOrUpdate(ctx, obj)
				if i < len(docs)-1 {
					if err != nil {
						t.Fatalf("set-up document %d of %d must be accepted: %v", i+1, len(docs), err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("accepted; want refused with %q", want)
				}
				if !apierrors.IsInvalid(err) {
					t.Fatalf("want an Invalid error carrying %q, got %v", want, err)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error does not contain %q:\n%v", want, err)
				}
				if testing.Verbose() {
					t.Logf("refused: %v", err)
				}
			}
		})
	}
}

// The samples directory holds nothing the tests above do not cover.
func TestSamplesAreYAML(t *testing.T) {
	for _, dir := range []string{samplesDir, filepath.Join(samplesDir, "invalid")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || e.Name() == "README.md" {
				continue
			}
			if filepath.Ext(e.Name()) != ".yaml" {
				t.Errorf("%s: samples must end in .yaml to be tested", filepath.Join(dir, e.Name()))
			}
		}
	}
}
