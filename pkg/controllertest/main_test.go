package controllertest

import (
	"testing"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// api is the package's API server with the test Widget CRD, started by the first test that
// needs one; the pure tests need none. Main checks that no test leaves a goroutine running
// (the crash switch's HTTP server, a manager).
var api = NewAPIServer(envtest.Options{CRDs: testapi.CRDs()}, testapi.AddToScheme)

func TestMain(m *testing.M) { api.Main(m) }
