package apiserver

import (
	"os"
	"testing"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// env is the API server the managed-fields tests run against (drift_test.go), with the
// Widget CRD installed.
var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs()})
	}))
}
