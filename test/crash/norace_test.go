//go:build !race

package crash_test

// raceFactor multiplies the crash explorations' strides: 1 without the race detector.
const raceFactor = 1
