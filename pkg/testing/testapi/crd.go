package testapi

import (
	"embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// crdFiles holds the CRD that `make manifests` generates from the markers in types.go.
//
//go:embed crd/*.yaml
var crdFiles embed.FS

// CRDs returns the Widget CRD, ready for envtest.Options.CRDs. It panics only if the embedded,
// generated manifest does not parse, which a test of this package rules out.
func CRDs() []*apiextensionsv1.CustomResourceDefinition {
	entries, err := crdFiles.ReadDir("crd")
	if err != nil {
		panic(fmt.Sprintf("testapi: read embedded CRDs: %v", err))
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(entries))
	for _, e := range entries {
		raw, err := crdFiles.ReadFile("crd/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("testapi: read %s: %v", e.Name(), err))
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			panic(fmt.Sprintf("testapi: parse %s: %v", e.Name(), err))
		}
		out = append(out, crd)
	}
	return out
}
