// Package crash_test kills the operator at each of its writes in turn, with the test kit's crash
// explorer (controllertest.ExploreCrashes), and checks that a fresh operator finishes the work
// with nothing lost, deleted, created again or rewritten. Issue 30:
//
//   - TestExplorer_ReportsAPlantedBug (explorer_test.go): the explorer itself fails when a
//     component regenerates a password that a crash left half written, and names the crash point.
//   - TestGitea_* (gitea_test.go): the reference operator's first deploy of the sample, a version
//     upgrade with its migration Job, and a Gitea deleted with storage deletionPolicy Retain and
//     created again under the same name, each at every crash point (every second one for the
//     deletion; strides double under -race; KDAG_CRASH_STRIDE=1 explores every one).
//   - TestPostgreSQL_StorageGrows (gitea_test.go): a database's volume grows, its StatefulSet
//     re-created (controller.Recreate), at every crash point.
//   - TestGitea_FirstDeploy_CrashWhileRecovering (gitea_test.go): the first deploy with a second
//     crash, of the manager that recovers from the first (Crashes.Again).
//   - switches_test.go: the storage deletionPolicy switched Retain → Delete → Retain then the
//     Gitea deleted (data kept), switched to Delete then deleted (data gone), the Valkey cache
//     disabled then enabled, and a shard move (a kdag.dev/shard-next hand-over from shard a to
//     shard b, one manager per shard: Crashes.Shards).
//
// envtest only (no local cluster): a real kube-apiserver and etcd, no controllers, so the
// scenarios mark workloads ready themselves (Harness.MarkReady) and collect garbage themselves
// (Harness.CollectGarbage). One API server for the package; TestMain checks with goleak that
// nothing the tests started is still running. Run it with `make test-crash`.
package crash_test

import (
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

var scheme = runtime.NewScheme()

// api serves the kit's Widget and the reference operator's kinds.
var api = func() *controllertest.APIServer {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
	return controllertest.NewAPIServer(envtest.Options{
		Scheme: scheme, CRDs: testapi.CRDs(), CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")},
	})
}()

func TestMain(m *testing.M) {
	// The managers' logs are not the tests' output; without a logger, controller-runtime warns.
	ctrl.SetLogger(logr.Discard())
	// Every manager is stopped and the API server is gone: nothing may still run (but the
	// libraries' known leaks, which leak.Check ignores).
	api.Main(m)
}
