package v1alpha1_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

// The generated CRDs and the samples, relative to this package.
const (
	crdDir     = "../../../config/crd/bases"
	samplesDir = "../../../config/samples"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{CRDDirectoryPaths: []string{crdDir}, Scheme: scheme})
	}))
}

// strict makes the API server refuse unknown or duplicate fields, so that a typo in a sample
// fails instead of being dropped silently.
var strict = client.FieldValidation("Strict")

// readDocuments returns the non-empty YAML documents of a file as unstructured objects.
func readDocuments(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("split %s: %v", path, err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		if len(obj) == 0 { // only comments
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no object", path)
	}
	return out
}

// createOrUpdate creates obj, or updates the object of the same name with obj's content when it
// exists (the way a second document of a sample file changes the first).
func createOrUpdate(ctx context.Context, obj *unstructured.Unstructured) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)
	switch {
	case apierrors.IsNotFound(err):
		return env.Client.Create(ctx, obj, strict)
	case err != nil:
		return err
	}
	obj.SetResourceVersion(live.GetResourceVersion())
	return env.Client.Update(ctx, obj, strict)
}

// sampleFiles lists the YAML files of dir, without the kustomization.
func sampleFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := files[:0]
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no samples in %s", dir)
	}
	return out
}

// expectation returns the text after "# expect:" on the first line of path.
func expectation(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	want, ok := strings.CutPrefix(first, "# expect:")
	want = strings.TrimSpace(want)
	if !ok || want == "" {
		t.Fatalf("%s: the first line must be `# expect: <part of the error message>`, got %q", path, first)
	}
	return want
}
