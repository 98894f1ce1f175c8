package controllertest

import (
	"testing"

	"go.uber.org/goleak"
)

// The package's tests need no API server; those that start goroutines (an HTTP server for the
// crash switch) must stop them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
