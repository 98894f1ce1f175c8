package resources

import (
	"testing"

	"go.uber.org/goleak"
)

// The package's tests are pure: no API server (those are in internal/apiserver).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
