package shard

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// scheme has client-go's types and the Widget test type.
var scheme = testapi.NewScheme()

// api is the API server of the tests that need one (replicas_test.go), started by the first of
// them: the ring, decision and member tests run without binaries.
var api = controllertest.NewAPIServer(envtest.Options{CRDs: testapi.CRDs(), Scheme: scheme})

// TestMain runs the tests, stops the API server, and fails the run when a goroutine the tests
// started (a manager, a member, an assigner and its cache) is still running.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard()) // the managers' logs; failures say what went wrong
	// A metadata informer's watch is wrapped in watch.Filter (controller-runtime's GVK fix-up),
	// whose goroutine blocks for ever on an event nobody reads once the informer stops: the
	// assigner's cache leaves one behind when it stops (kubernetes/kubernetes#113254).
	api.Main(m, goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}
