// Package envtest starts a real kube-apiserver and etcd (controller-runtime's envtest) from the
// binaries that `make tools-cluster` builds from source, installs CRDs, and hands out a client and a
// fresh namespace per test. Use it for everything the API server decides: server-side apply
// merges, managed fields, defaulting, OpenAPI and CEL validation, finalizers, the status
// subresource. It runs no controllers: no garbage collection, no Deployment or Job status (use
// package cluster for those).
//
// Typical use, one API server per test package:
//
//	var env *envtest.Environment
//
//	func TestMain(m *testing.M) {
//		os.Exit(envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs()}))
//	}
//
//	func TestSomething(t *testing.T) {
//		ns := env.Namespace(t) // deleted when the test ends
//		...
//	}
package envtest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kdag-dev/kdag/pkg/localcluster"
	"github.com/kdag-dev/kdag/pkg/testing/internal/names"
)

// serviceClusterIPRange is the API server's --service-cluster-ip-range.
const serviceClusterIPRange = "10.0.0.0/16"

// Options configure Start. The zero value starts an API server with the built-in types only.
type Options struct {
	// CRDs are installed before Start returns. Default: none.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// CRDDirectoryPaths are directories (or files) of CRD manifests installed before Start
	// returns; a missing path is an error. Default: none.
	CRDDirectoryPaths []string
	// Scheme is used by Environment.Client. Default: client-go's scheme plus apiextensions/v1.
	Scheme *runtime.Scheme
}

// Environment is a running API server.
type Environment struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is an uncached client built from Config and Options.Scheme, whose reads are sent
	// again when the transport fails them (clientConfig): a test's own reads do not fail it on a
	// reset HTTP/2 stream.
	Client client.Client
	// Scheme is the scheme Client uses.
	Scheme *runtime.Scheme

	env *crenvtest.Environment
	seq atomic.Int64
}

// Start starts etcd and kube-apiserver from localcluster.BinDir, installs the CRDs of opts and waits until
// they are served. It returns an error when a binary is missing (with the command that builds it),
// when the control plane does not start, or when a CRD cannot be installed. Call Stop when done.
func Start(opts Options) (*Environment, error) {
	dir, err := localcluster.BinDir("kube-apiserver", "etcd")
	if err != nil {
		return nil, err
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(scheme))
		utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	}
	env := &crenvtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDs:                  opts.CRDs,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: true,
	}
	// Cluster IPs for 65534 Services: envtest's default range, a /24, is full after 254, which a
	// test process reaches when its tests leave their namespaces behind (no namespace controller
	// deletes them): the crash explorer at every crash point runs the reference operator, three
	// Services each, in a new namespace per crash point.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", serviceClusterIPRange)
	cfg, err := env.Start()
	if err != nil {
		return nil, errors.Wrapf(err, "start envtest control plane from %s", dir)
	}
	c, err := client.New(clientConfig(cfg), client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, errors.Wrap(err, "create envtest client")
	}
	return &Environment{Config: cfg, Client: c, Scheme: scheme, env: env}, nil
}

// Stop stops kube-apiserver and etcd and removes their data. It is safe to call on nil.
func (e *Environment) Stop() error {
	if e == nil {
		return nil
	}
	return errors.Wrap(e.env.Stop(), "stop envtest control plane")
}

// Main starts an Environment into *env, runs the package's tests, stops it, and returns the exit
// code for os.Exit. A failure to start is printed and returns 1, so a missing binary shows up as
// one clear message rather than every test failing.
func Main(m *testing.M, env **Environment, opts Options) int {
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// User returns a config that reaches the API server as the user name in groups, authenticated
// by a client certificate and authorized by RBAC like any user: it may do nothing until a Role
// or ClusterRole is bound to it. It returns an error when the certificate cannot be made.
func (e *Environment) User(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.AddUser(crenvtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, errors.Wrapf(err, "envtest: add user %s", name)
	}
	return u.Config(), nil
}

// Namespace creates a namespace named after the test and returns its name; the namespace is
// deleted when the test ends. envtest has no namespace controller, so the objects inside are not
// removed: tests must not rely on deletion emptying it.
func (e *Environment) Namespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", names.DNSLabel(t.Name(), 50), e.seq.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ctx := context.Background()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return name
}
