package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// components are the control plane's processes whose logs SaveState keeps, by kwokctl's names.
var components = []string{"kube-controller-manager", "kube-scheduler", "kwok-controller"}

// stateResources are what SaveState lists of a namespace when the caller names nothing more: the
// workloads, what their controllers create and what explains them.
var stateResources = []string{
	"statefulsets", "deployments", "replicasets", "jobs", "pods", "controllerrevisions",
	"persistentvolumeclaims", "events",
}

// SaveState writes into dir what explains a failed test that an API server and its controllers
// decided, for reading after the cluster is gone (a CI machine deletes it):
//   - namespace.yaml: `kubectl get -o yaml` of ns's workloads, pods, ControllerRevisions, claims
//     and events, and of the extra resources named (kubectl names, such as
//     "postgresqls.gitea.kdag.dev"), as the API server holds them now;
//   - persistentvolumes.yaml: every PersistentVolume;
//   - <component>.log for kube-controller-manager, kube-scheduler and kwok-controller.
//
// It is for a test's failure path: each step that fails is logged on t and the others go on; it
// never fails t. It takes at most a minute.
func (c *Cluster) SaveState(t testing.TB, ns, dir string, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	save := func(name string, out []byte, err error) {
		if err != nil {
			t.Logf("save cluster state %s: %v", name, err)
			if len(out) == 0 {
				return
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), out, 0o600); err != nil {
			t.Logf("save cluster state %s: %v", name, err)
		}
	}
	resources := strings.Join(append(append([]string{}, stateResources...), extra...), ",")
	out, err := c.Kubectl(ctx, "get", resources, "--namespace", ns, "--output", "yaml")
	save("namespace.yaml", out, err)
	out, err = c.Kubectl(ctx, "get", "persistentvolumes", "--output", "yaml")
	save("persistentvolumes.yaml", out, err)
	for _, component := range components {
		out, err := c.ComponentLog(ctx, component)
		save(component+".log", out, err)
	}
	t.Logf("the cluster's state for namespace %s and its controllers' logs are in %s", ns, dir)
}
