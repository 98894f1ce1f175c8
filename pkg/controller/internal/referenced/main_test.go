package referenced

import (
	"os"
	"testing"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

// The package's tests start informers on fake clients: none may outlive its test.
func TestMain(m *testing.M) { os.Exit(leak.Check(m.Run)) }
