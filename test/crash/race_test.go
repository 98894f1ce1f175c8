//go:build race

package crash_test

// raceFactor multiplies the crash explorations' strides: the race detector makes each run about
// twice as long (make test runs with -race), and the total stays within about 5 minutes.
const raceFactor = 2
