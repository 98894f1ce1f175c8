package reconciler

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// scheme is the scheme of the package's tests: client-go's types and the test Widget.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(testapi.AddToScheme(s))
	return s
}()

// The package's tests are pure (no API server): none may leave a goroutine behind.
func TestMain(m *testing.M) { os.Exit(leak.Check(m.Run)) }
