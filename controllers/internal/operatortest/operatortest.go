// Package operatortest is what the reference operator's component tests share: an API server
// with the operator's CRDs.
package operatortest

import (
	"path/filepath"
	"runtime"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
)

// APIServer returns a test package's API server (controllertest.NewAPIServer) with the reference
// operator's CRDs from config/crd/bases installed and scheme for its clients and managers; it
// starts when the package's first test needs it.
func APIServer(scheme *k8sruntime.Scheme) *controllertest.APIServer {
	return controllertest.NewAPIServer(envtest.Options{Scheme: scheme, CRDDirectoryPaths: []string{crdDir()}})
}

// crdDir is config/crd/bases, found from this file's place in the repository so that any test
// package can use it whatever its depth.
func crdDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "crd", "bases")
}
