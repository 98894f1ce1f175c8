package controllertest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pkg/errors"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Defaulted returns a copy of obj, a custom resource of one of api's CRDs, with the defaults of
// its CRD's schema filled in as the API server fills them when obj is created: apiextensions'
// structural defaulting of the served version's schema, applied to obj as it would be sent
// (its JSON, zero-valued fields without omitempty included). The API server need not run: the
// CRDs are read from api's options (CRDs and CRDDirectoryPaths). A plan or golden test built on
// a Defaulted owner sees what the operator will see in a cluster, not hand-typed defaults.
// Defaulted fails t when obj's type is not in api's scheme, no CRD of api serves its kind and
// version, or the CRD's schema is not structural.
//
//	owner := controllertest.Defaulted(t, api, &v1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Name: "demo"}})
func Defaulted[T client.Object](t testing.TB, api *APIServer, obj T) T {
	t.Helper()
	out := obj.DeepCopyObject().(T)
	if err := api.Default(out); err != nil {
		t.Fatalf("controllertest: default %T %s: %v", obj, obj.GetName(), err)
	}
	return out
}

// Default fills in obj's defaults in place, as Defaulted does. It returns an error when obj's
// type is not in api's scheme, no CRD of api serves its kind and version, or the CRD's schema
// is not structural.
func (a *APIServer) Default(obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, a.opts.Scheme)
	if err != nil {
		return err
	}
	s, err := a.structuralSchema(gvk)
	if err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	structuraldefaulting.Default(content, s)
	return errors.Wrap(runtime.DefaultUnstructuredConverter.FromUnstructured(content, obj), "read back the defaulted object")
}

// structuralSchema returns the structural schema of gvk's version in api's CRDs.
func (a *APIServer) structuralSchema(gvk schema.GroupVersionKind) (*structuralschema.Structural, error) {
	crds, err := a.crds()
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind {
			continue
		}
		i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == gvk.Version })
		if i < 0 || crd.Spec.Versions[i].Schema == nil || crd.Spec.Versions[i].Schema.OpenAPIV3Schema == nil {
			return nil, errors.Errorf("CRD %s has no schema for version %s", crd.Name, gvk.Version)
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[i].Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, errors.Wrapf(err, "CRD %s", crd.Name)
		}
		s, err := structuralschema.NewStructural(internal)
		return s, errors.Wrapf(err, "CRD %s: schema of version %s", crd.Name, gvk.Version)
	}
	return nil, errors.Errorf("no CRD serves %s (give it to NewAPIServer: envtest.Options CRDs or CRDDirectoryPaths)", gvk)
}

// crds returns api's CRDs: opts.CRDs, then those of the files in opts.CRDDirectoryPaths
// (.yaml, .yml and .json files, each a stream of documents; other kinds are skipped).
func (a *APIServer) crds() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out := slices.Clone(a.opts.CRDs)
	for _, path := range a.opts.CRDDirectoryPaths {
		files := []string{path}
		if fi, err := os.Stat(path); err != nil {
			return nil, err
		} else if fi.IsDir() {
			entries, err := os.ReadDir(path)
			if err != nil {
				return nil, err
			}
			files = nil
			for _, e := range entries {
				switch filepath.Ext(e.Name()) {
				case ".yaml", ".yml", ".json":
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
		for _, f := range files {
			crds, err := readCRDs(f)
			if err != nil {
				return nil, err
			}
			out = append(out, crds...)
		}
	}
	return out, nil
}

// readCRDs returns the CustomResourceDefinitions of the file at path.
func readCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, errors.Wrapf(err, "read %s", path)
		}
		if crd.Kind == "CustomResourceDefinition" {
			out = append(out, crd)
		}
	}
}

// toUnstructured returns obj's content as its JSON would hold it.
func toUnstructured(obj any) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
