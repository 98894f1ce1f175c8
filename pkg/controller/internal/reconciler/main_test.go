package reconciler

import (
	"os"
	"testing"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// scheme is the scheme of the package's tests: client-go's types and the test Widget.
var scheme = testapi.NewScheme()

// The package's tests are pure (no API server): none may leave a goroutine behind.
func TestMain(m *testing.M) { os.Exit(leak.Check(m.Run)) }
