// Package operatortest is what the reference operator's component tests share: an API server
// with the operator's CRDs.
package operatortest

import (
	"path/filepath"
	"runtime"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
)

// Scheme returns a new scheme with client-go's types and the reference operator's API.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(giteav1alpha1.AddToScheme(s))
	return s
}

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
