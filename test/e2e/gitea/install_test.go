package gitea

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/internal/release"
)

// TestInstallYAML builds the install.yaml of a release (`make release`) and applies it to the
// local cluster as its header says, `kubectl apply --server-side`, with a server-side dry run:
// the API server validates every object (schemas, RBAC rules, the CRDs themselves).
func TestInstallYAML(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Fatalf("no kustomize at %s: `make test` (or `make tools-dev`) builds it: %v", kustomize, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const version = "v0.5.0-1-gabc1234"
	manifests, err := release.InstallYAML(ctx, kustomize, root, version)
	if err != nil {
		t.Fatal(err)
	}
	if want := "image: ghcr.io/kdag-dev/kdag:" + version + "\n"; bytes.Count(manifests, []byte(want)) != 1 {
		t.Errorf("install.yaml does not name the image %q once", want)
	}

	// A dry run creates nothing: the namespace the Deployment goes to must exist already.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kdag-system"}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(file, manifests, 0o600); err != nil {
		t.Fatal(err)
	}
	applied, err := local.Kubectl(ctx, "apply", "--server-side", "--dry-run=server", "-f", file)
	if err != nil {
		t.Fatalf("kubectl apply --server-side --dry-run=server -f install.yaml: %v", err)
	}
	t.Logf("server dry run:\n%s", applied)
	objects := bytes.Count(manifests, []byte("\nkind: "))
	if n := bytes.Count(applied, []byte("serverside-applied (server dry run)")); n != objects || objects < 12 {
		t.Errorf("%d objects applied by the dry run, install.yaml holds %d (want 12 or more):\n%s", n, objects, applied)
	}
	for _, want := range []string{
		"namespace/kdag-system", "customresourcedefinition.apiextensions.k8s.io/giteas.gitea.kdag.dev",
		"clusterrole.rbac.authorization.k8s.io/kdag-manager", "deployment.apps/kdag-manager",
	} {
		if !strings.Contains(string(applied), want+" serverside-applied") {
			t.Errorf("the dry run did not apply %s:\n%s", want, applied)
		}
	}
}
