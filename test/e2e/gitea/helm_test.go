package gitea

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHelmChart lints charts/kdag and applies its rendering to the local cluster with a
// server-side dry run, so the API server validates every manifest (schemas, RBAC rules).
func TestHelmChart(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("no helm at %s: `make test` (or `make tools-dev`) builds it: %v", helm, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runHelm := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, helm, args...)
		cmd.Dir = root
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.Bytes()
	}

	out := runHelm("lint", "charts/kdag")
	if !bytes.Contains(out, []byte("0 chart(s) failed")) {
		t.Errorf("helm lint:\n%s", out)
	}

	manifests := runHelm("template", "t", "charts/kdag", "--namespace", "kdag-system")
	for _, kind := range []string{"kind: Deployment", "kind: ServiceAccount", "kind: ClusterRole", "kind: ClusterRoleBinding", "kind: Service"} {
		if !bytes.Contains(manifests, []byte(kind+"\n")) {
			t.Errorf("helm template has no %s", kind)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kdag-system"}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "kdag.yaml")
	if err := os.WriteFile(file, manifests, 0o600); err != nil {
		t.Fatal(err)
	}
	applied, err := local.Kubectl(ctx, "apply", "--dry-run=server", "-f", file)
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server of the chart: %v", err)
	}
	t.Logf("server dry run:\n%s", applied)
	if n := bytes.Count(applied, []byte("(server dry run)")); n != bytes.Count(manifests, []byte("\nkind: ")) {
		t.Errorf("%d objects accepted by the dry run, the chart renders %d:\n%s", n, bytes.Count(manifests, []byte("\nkind: ")), applied)
	}
}
