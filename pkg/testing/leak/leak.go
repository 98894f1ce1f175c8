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
// goleak's (IgnoreTopFunction for a known leak of a library, say).
func Check(run func() int, opts ...goleak.Option) int {
	before := goleak.IgnoreCurrent()
	code := run()
	if code != 0 {
		return code
	}
	if err := goleak.Find(append([]goleak.Option{before}, opts...)...); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return 0
}
