package schemas

import (
	"os"
	"testing"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

// env is the API server the tests of provider_envtest_test.go run against.
var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{})
	}))
}
