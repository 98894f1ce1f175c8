package schemas

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
)

// env is the API server the tests of provider_envtest_test.go run against.
var env *envtest.Environment

func TestMain(m *testing.M) {
	before := goleak.IgnoreCurrent()
	code := envtest.Main(m, &env, envtest.Options{})
	if code == 0 {
		if err := goleak.Find(before); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
