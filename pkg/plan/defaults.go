package plan

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// applyDefaults fills x with the schema's defaults as the API server does for a structural
// schema: a missing property with a default gets a copy of it, then defaults apply inside every
// object, array item and map value, the defaulted ones included.
func applyDefaults(x any, s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	switch v := x.(type) {
	case map[string]any:
		for name, prop := range s.Properties {
			if _, ok := v[name]; !ok && prop.Default != nil {
				var d any
				if err := yaml.Unmarshal(prop.Default.Raw, &d); err == nil {
					v[name] = d
				}
			}
			if child, ok := v[name]; ok {
				applyDefaults(child, &prop)
			}
		}
		if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
			for _, child := range v {
				applyDefaults(child, ap.Schema)
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, item := range v {
				applyDefaults(item, s.Items.Schema)
			}
		}
	}
}
