package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// TestRunPlan_LiveOwnerRefused plans, from a file, changes of the sample that the Gitea CRD
// refuses: the immutable storage.accessMode of a Gitea on the cluster, replicas -3 on the cluster
// and for a new Gitea. The plan reports the Gitea's own refusal with the API server's message,
// exits 2, and plans no child (no Recreate of the server's claim, no refusal of its Deployment).
func TestRunPlan_LiveOwnerRefused(t *testing.T) {
	env := api.Env(t)
	kubeconfig := writeKubeconfig(t, env)
	for _, tc := range []struct {
		name, spec string
		onCluster  bool
		message    string // in the API server's refusal
	}{
		{name: "immutable-access-mode", spec: "storage:\n    accessMode: ReadWriteMany\n", onCluster: true, message: "storage.accessMode is immutable"},
		{name: "negative-replicas", spec: "replicas: -3\n", onCluster: true, message: "spec.replicas"},
		{name: "negative-replicas-new", spec: "replicas: -3\n", message: "spec.replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "plan-refused-" + tc.name
			if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			if tc.onCluster {
				if err := env.Client.Create(t.Context(), &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(t.TempDir(), "gitea.yaml")
			manifest := "apiVersion: gitea.kdag.dev/v1alpha1\nkind: Gitea\nmetadata:\n  name: demo\nspec:\n  " + tc.spec
			if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := runPlan([]string{"--live", "-f", file, "--kubeconfig", kubeconfig, "-n", ns}, &out)
			if got := plan.ExitCode(err); got != 2 {
				t.Fatalf("plan --live -f = %v (exit %d), want exit 2: the API server refuses the Gitea\n%s", err, got, out.String())
			}
			got := out.String()
			for _, want := range []string{"Refused    Gitea " + ns + "/demo\n", tc.message} {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			for _, child := range []string{"PostgreSQL", "Valkey", "GiteaServer", "PersistentVolumeClaim", "Deployment"} {
				if strings.Contains(got, child) {
					t.Errorf("output plans %s from a spec the API server refuses:\n%s", child, got)
				}
			}
		})
	}
}

// TestRunPlan_LiveYAMLGroupsEachChild plans the sample as YAML: each child owner's objects come
// under its own name (the GiteaServer's Service under the GiteaServer, not the Valkey before it).
func TestRunPlan_LiveYAMLGroupsEachChild(t *testing.T) {
	env := api.Env(t)
	ns := "plan-live-yaml"
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runPlan([]string{"--live", "-f", "config/samples/gitea.yaml", "--kubeconfig", writeKubeconfig(t, env), "-n", ns, "-o", "yaml"}, &out)
	if plan.ExitCode(err) != 1 {
		t.Fatalf("plan --live -f -o yaml = %v, want changes\n%s", err, out.String())
	}
	owners := map[string]string{} // owner -> its YAML entry
	for _, entry := range strings.Split(out.String(), "\n- ")[1:] {
		owner, _, _ := strings.Cut(strings.TrimPrefix(entry, "owner: "), "\n")
		owners[owner] = entry
	}
	for owner, objects := range map[string][]string{
		"Valkey " + ns + "/demo-valkey": {"name: demo-valkey-config"},
		"GiteaServer " + ns + "/demo":   {"name: demo-http", "name: demo-data"},
	} {
		entry, ok := owners[owner]
		if !ok {
			t.Fatalf("no entry starts with owner %q:\n%s", owner, out.String())
		}
		for _, want := range objects {
			if !strings.Contains(entry, want) {
				t.Errorf("the entry of %s lacks %q:\n%s", owner, want, entry)
			}
		}
	}
	if strings.Contains(owners["Valkey "+ns+"/demo-valkey"], "demo-http") {
		t.Errorf("the GiteaServer's Service is under the Valkey:\n%s", out.String())
	}
}
