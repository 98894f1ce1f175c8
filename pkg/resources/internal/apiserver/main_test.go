package apiserver

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// env is the API server the managed-fields tests run against (drift_test.go), with the
// Widget CRD installed.
var env *envtest.Environment

func TestMain(m *testing.M) {
	// Goroutines that exist before the environment starts are not the environment's.
	before := goleak.IgnoreCurrent()
	code := envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs()})
	if code == 0 {
		if err := goleak.Find(before); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
