package plan

import (
	"github.com/pkg/errors"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
)

// structural returns s as the API server holds a CRD version's schema: apiextensions' structural
// schema, which its defaulting reads. It returns an error when s does not convert or is not
// structural (the API server refuses such a v1 CRD).
func structural(s *apiextensionsv1.JSONSchemaProps) (*structuralschema.Structural, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		return nil, errors.Wrap(err, "convert the schema")
	}
	st, err := structuralschema.NewStructural(internal)
	return st, errors.Wrap(err, "the schema is not structural")
}

// applyDefaults fills x, an object's JSON content, with s's defaults as the API server does when
// the object is created or read (apiextensions' structural defaulting): a missing property with a
// default gets a copy of it, then defaults apply inside every object, array item and map value,
// the defaulted ones included. A nil s leaves x alone.
func applyDefaults(x any, s *structuralschema.Structural) {
	if s != nil {
		structuraldefaulting.Default(x, s)
	}
}
