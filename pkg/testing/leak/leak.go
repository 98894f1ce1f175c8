// Package leak is the goroutine-leak check of kdag's test packages, in one place: a TestMain
// runs its tests (and the API server or cluster they share) through Check, which fails the
// test binary when a goroutine started meanwhile is still running once everything stopped.
//
//	func TestMain(m *testing.M) { os.Exit(leak.Check(m.Run)) }
package leak

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// Check runs run (the package's tests: m.Run, or a function that starts what the tests share,
// runs m.Run and stops it) and returns its exit code. When that code is 0 and a goroutine that
// did not exist before run is still running after it (goleak.Find, which retries for a while
// so that goroutines may end), Check writes the goroutines to stderr and returns 1. opts are
// goleak's (IgnoreTopFunction for a known leak of a library, say); the libraries' leaks that any
// kdag test can meet (libraryLeaks) are ignored without them.
func Check(run func() int, opts ...goleak.Option) int {
	before := goleak.IgnoreCurrent()
	code := run()
	if code != 0 {
		return code
	}
	if err := goleak.Find(append(append([]goleak.Option{before}, libraryLeaks...), opts...)...); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}

// libraryLeaks are goroutines of kdag's libraries that outlive a test through no fault of its
// own. controller-runtime v0.25's multi-namespace cache (a manager whose cache is limited to
// namespaces, as the test kit's are) starts one per informer and one per event handler it
// registers, each waiting until the informers of every namespace have synced, and they never end
// when the manager stops first: a manager stopped as its controllers start their watches. A
// real operator process exits; a test binary would fail (the handler's was seen in test/crash
// once in six full runs, and in examples/hello).
var libraryLeaks = []goleak.Option{
	goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformer.func1"),
	goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformerHandlerRegistration.func1"),
}
