package controllertest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
)

// APIServer is the real kube-apiserver (and etcd) a test package's harnesses share: started the
// first time a test needs it, so that the package's pure tests (golden plans, status logic) run
// with no control-plane binaries, and stopped when the package's tests end. Declare one per test
// package and hand its Main to TestMain:
//
//	var api = controllertest.NewAPIServer(envtest.Options{Scheme: scheme, CRDDirectoryPaths: []string{"../../config/crd/bases"}})
//
//	func TestMain(m *testing.M) { api.Main(m) }
type APIServer struct {
	opts envtest.Options
	once sync.Once
	env  *envtest.Environment
	err  error
}

// NewAPIServer returns an APIServer that starts with opts (CRDs to install, the scheme its client
// and the harnesses' managers use). When opts.Scheme is nil, the scheme is client-go's built-in
// types plus what addToScheme adds (an API package's AddToScheme, for example). Nothing runs
// until a test calls Start or Env.
func NewAPIServer(opts envtest.Options, addToScheme ...func(*runtime.Scheme) error) *APIServer {
	if opts.Scheme == nil {
		opts.Scheme = runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(opts.Scheme))
		for _, add := range addToScheme {
			utilruntime.Must(add(opts.Scheme))
		}
	}
	return &APIServer{opts: opts}
}

// RunningAPIServer returns an APIServer over env, an API server the test package started itself
// (its TestMain runs envtest.Main, say), for harnesses: Env returns env, and the package's
// TestMain, not Main, stops it.
func RunningAPIServer(env *envtest.Environment) *APIServer {
	a := &APIServer{env: env}
	a.once.Do(func() {})
	return a
}

// Env returns the running API server, starting it on the first call. It fails t when the
// control plane cannot start (the error names the binary missing and the make target that
// builds it: make tools-cluster).
func (a *APIServer) Env(t testing.TB) *envtest.Environment {
	t.Helper()
	a.once.Do(func() { a.env, a.err = envtest.Start(a.opts) })
	if a.err != nil {
		t.Fatalf("controllertest: start the API server: %v", a.err)
	}
	return a.env
}

// Main runs the package's tests, stops the API server if a test started it, checks that no
// goroutine the tests started is still running (leak.Check, with opts for known leaks of a
// library) and exits: with the tests' code when they fail, 1 when the API server does not stop
// or a goroutine leaked, 0 otherwise. Call it from TestMain.
func (a *APIServer) Main(m *testing.M, opts ...goleak.Option) {
	os.Exit(leak.Check(func() int {
		code := m.Run()
		if a.env == nil {
			return code
		}
		if err := a.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "controllertest:", err)
			if code == 0 {
				code = 1
			}
		}
		return code
	}, opts...))
}
