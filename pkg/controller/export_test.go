package controller

// Hooks for the external test package controller_test (shard_test.go), which may import package
// shard (package controller's own tests may not: shard imports controller).

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// SharedEnv returns the API server of the package's tests (set by TestMain).
func SharedEnv() *envtest.Environment { return env }

// SharedScheme is the scheme of the package's tests.
var SharedScheme = scheme

// WaitTimeout is how long the package's tests wait for a reconcile.
const WaitTimeout = waitTimeout

// CtrlConfigSkipNameValidation lets tests register controllers of one name in several managers.
func CtrlConfigSkipNameValidation() config.Controller { return ctrlConfigSkipNameValidation() }

// NewFuncRM returns the test ResourceManager over Widgets whose graph is add, owning ConfigMaps,
// Secrets, Services, Deployments and the types of owned.
func NewFuncRM(add func(w *testapi.Widget, b *Graph) error, owned ...client.Object) ResourceManager[*testapi.Widget] {
	return funcRM{add: add}.owning(owned...)
}

// SameType reports whether a and b are of one Go type.
func SameType(a, b client.Object) bool { return sameType(a, b) }

// ReferenceObjects returns how many objects of kind (a core kind: "Secret") the informers of c's
// referenced objects hold.
func ReferenceObjects(c *reconciler, kind string) int {
	return c.refs.cachedObjects(schema.GroupVersionKind{Version: "v1", Kind: kind})
}

// ShardCache and ShardControllerOptions, set by shard_test.go from package shard, make the
// managers of BenchmarkScaleReplicas static shards as kdag's --shard does: the cache narrowed to
// shard, and the reconciler options of its manager.
var (
	ShardCache             func(opts cache.Options, shard string) (cache.Options, error)
	ShardControllerOptions func(mgr ctrl.Manager, shard string) Options
)

// Register registers the reconciler named name for rm with mgr and returns it (Setup without the
// RBAC check), for tests that look inside it (ReferenceObjects).
func Register[T client.Object](mgr ctrl.Manager, name string, rm ResourceManager[T], opts ...Options) (*reconciler, error) {
	return registerFor(mgr, name, rm, opts...)
}
