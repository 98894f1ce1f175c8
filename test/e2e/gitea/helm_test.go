package gitea

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestHelmChart lints charts/kdag and applies its rendering, for each sharding mode (one manager;
// static shards: a Deployment per shard with --shard, distinct selectors; dynamic shards:
// --shards=auto), to the local cluster with a
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

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kdag-system"}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  []string
		// shards are the --shard flags of the Deployments, by Deployment name ("" for none,
		// "auto" for --shards=auto).
		shards map[string]string
	}{
		{"one manager", nil, map[string]string{"t-kdag": ""}},
		{"static shards", []string{"--set", "sharding.mode=static", "--set", "sharding.shards={tenants-a,tenants-b}"},
			map[string]string{"t-kdag": "", "t-kdag-shard-tenants-a": "tenants-a", "t-kdag-shard-tenants-b": "tenants-b"}},
		{"static shards only", []string{"--set", "sharding.mode=static", "--set", "sharding.shards={a}", "--set", "sharding.unsharded=false"},
			map[string]string{"t-kdag-shard-a": "a"}},
		{"dynamic shards", []string{"--set", "sharding.mode=auto", "--set", "replicaCount=3"}, map[string]string{"t-kdag": "auto"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifests := runHelm(append([]string{"template", "t", "charts/kdag", "--namespace", "kdag-system"}, tc.set...)...)
			for _, kind := range []string{"kind: Deployment", "kind: ServiceAccount", "kind: ClusterRole", "kind: ClusterRoleBinding", "kind: Service"} {
				if !bytes.Contains(manifests, []byte(kind+"\n")) {
					t.Errorf("helm template has no %s", kind)
				}
			}
			got := map[string]string{}
			selectors := map[string]bool{}
			for _, doc := range strings.Split(string(manifests), "\n---\n") {
				var d appsv1.Deployment
				if err := yaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" {
					continue
				}
				got[d.Name] = ""
				for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
					if shard, ok := strings.CutPrefix(arg, "--shard="); ok {
						got[d.Name] = shard
					}
					if arg == "--shards=auto" {
						got[d.Name] = "auto"
					}
				}
				sel := fmt.Sprint(d.Spec.Selector.MatchLabels)
				if selectors[sel] {
					t.Errorf("Deployment %s: selector %s overlaps another Deployment's", d.Name, sel)
				}
				selectors[sel] = true
			}
			if !maps.Equal(got, tc.shards) {
				t.Errorf("Deployments and their --shard: %v, want %v", got, tc.shards)
			}
			file := filepath.Join(t.TempDir(), "kdag.yaml")
			if err := os.WriteFile(file, manifests, 0o600); err != nil {
				t.Fatal(err)
			}
			applied, err := local.Kubectl(ctx, "apply", "--dry-run=server", "-f", file)
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server of the chart: %v", err)
			}
			if n := bytes.Count(applied, []byte("(server dry run)")); n != bytes.Count(manifests, []byte("\nkind: ")) {
				t.Errorf("%d objects accepted by the dry run, the chart renders %d:\n%s", n, bytes.Count(manifests, []byte("\nkind: ")), applied)
			}
		})
	}
	// A shard name that cannot be one is refused when the chart renders.
	cmd := exec.CommandContext(ctx, helm, "template", "t", "charts/kdag", "--set", "sharding.mode=static", "--set", "sharding.shards={Tenants_A}")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte(`"Tenants_A" is not a valid shard name`)) {
		t.Errorf("helm template with shard Tenants_A: %v\n%s, want it refused naming the shard", err, out)
	}
}
