package plan

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"sigs.k8s.io/yaml"
)

func TestApplyDefaults(t *testing.T) {
	// The schema of a small spec: a defaulted scalar, a defaulted object whose own property has
	// a default, a list of items and a map of values that each get defaults.
	const schemaYAML = `
type: object
properties:
  replicas: {type: integer, default: 1}
  image: {type: string}
  storage:
    type: object
    default: {}
    properties:
      size: {type: string, default: 1Gi}
      class: {type: string}
  ports:
    type: array
    items:
      type: object
      properties:
        protocol: {type: string, default: TCP}
  labels:
    type: object
    additionalProperties:
      type: object
      properties:
        weight: {type: integer, default: 5}
`
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.Unmarshal([]byte(schemaYAML), s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		in, want string
		schema   *apiextensionsv1.JSONSchemaProps
	}{
		{"missing properties get their defaults, objects' defaults get theirs", `{}`,
			`{replicas: 1, storage: {size: 1Gi}}`, s},
		{"set values are kept, zero ones too", `{replicas: 0, storage: {size: 5Gi, class: fast}}`,
			`{replicas: 0, storage: {size: 5Gi, class: fast}}`, s},
		{"a property without default stays missing", `{replicas: 3}`,
			`{replicas: 3, storage: {size: 1Gi}}`, s},
		{"array items", `{ports: [{}, {protocol: UDP}]}`,
			`{replicas: 1, storage: {size: 1Gi}, ports: [{protocol: TCP}, {protocol: UDP}]}`, s},
		{"map values", `{labels: {a: {}, b: {weight: 9}}}`,
			`{replicas: 1, storage: {size: 1Gi}, labels: {a: {weight: 5}, b: {weight: 9}}}`, s},
		{"a value of another type than the schema's is left alone", `{storage: big, ports: none}`,
			`{replicas: 1, storage: big, ports: none}`, s},
		{"no schema", `{}`, `{}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got, want map[string]any
			if err := yaml.Unmarshal([]byte(tc.in), &got); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			var st *structuralschema.Structural
			if tc.schema != nil {
				var err error
				if st, err = structural(tc.schema); err != nil {
					t.Fatal(err)
				}
			}
			applyDefaults(got, st)
			// Compared as JSON: the API server's defaulting gives integers as int64, YAML as float64.
			gotJSON, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(wantJSON), string(gotJSON)); diff != "" {
				t.Errorf("applyDefaults(%s) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestApplyDefaults_DefaultsAreCopies(t *testing.T) {
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.Unmarshal([]byte(`{type: object, properties: {tags: {type: object, default: {a: "1"}}}}`), s); err != nil {
		t.Fatal(err)
	}
	st, err := structural(s)
	if err != nil {
		t.Fatal(err)
	}
	first, second := map[string]any{}, map[string]any{}
	applyDefaults(first, st)
	applyDefaults(second, st)
	first["tags"].(map[string]any)["a"] = "changed"
	if got := second["tags"].(map[string]any)["a"]; got != "1" {
		t.Errorf("second object's default = %v after the first's changed, want a copy with 1", got)
	}
}
