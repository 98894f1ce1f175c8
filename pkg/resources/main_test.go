package resources

import (
	"os"
	"testing"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

// The package's tests are pure: no API server (those are in internal/apiserver).
func TestMain(m *testing.M) { os.Exit(leak.Check(m.Run)) }
