package schemas

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

func newEnvProvider(t *testing.T, opts Options) *Provider {
	t.Helper()
	p, err := NewProviderForConfig(env.Config, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fieldSet(t *testing.T, p *Provider, u *unstructured.Unstructured) *fieldpath.Set {
	t.Helper()
	tv, err := p.WithContext(context.Background()).ObjectToTyped(u)
	if err != nil {
		t.Fatalf("type %s: %v", u.GetKind(), err)
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestProvider_BuiltInKinds: the API server's schemas key lists as server-side apply does,
// defaulted key fields included (a Service port's protocol).
func TestProvider_BuiltInKinds(t *testing.T) {
	p := newEnvProvider(t, Options{})
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "web", "namespace": "ns"},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(80)}}},
	}}
	want := fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyByFields("port", 80, "protocol", "TCP"), "port")
	if set := fieldSet(t, p, svc); !set.Has(want) {
		t.Errorf("field set of a Service lacks %s:\n%s", want, set)
	}
	deploy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns"},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
	}}
	// LabelSelector is atomic: one field, nothing below it.
	if set := fieldSet(t, p, deploy); !set.Has(fieldpath.MakePathOrDie("spec", "selector")) ||
		set.Has(fieldpath.MakePathOrDie("spec", "selector", "matchLabels", "app")) {
		t.Errorf("field set of a Deployment does not hold spec.selector as one atomic field:\n%s", set)
	}
}

// TestProvider_UpdatedCRD: a converter built before a CRD gained a field refreshes when an
// object uses the field.
func TestProvider_UpdatedCRD(t *testing.T) {
	ctx := context.Background()
	gv := schema.GroupVersion{Group: "schemas.test.kdag.dev", Version: "v1"}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + gv.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gv.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gv.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"a": {Type: "string"}}},
					},
				}},
			}},
		},
	}
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })

	gadget := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gv.String(), "kind": "Gadget",
			"metadata": map[string]any{"name": "g", "namespace": "ns"},
			"spec":     spec,
		}}
	}
	p := newEnvProvider(t, Options{MinRefreshInterval: -1})
	tc := p.WithContext(ctx)
	// The API server publishes a new CRD's schema shortly after the CRD is created.
	poll.Until(t, "the schema of "+gv.String()+" is published", 20*time.Second, func(context.Context) string {
		_, err := tc.ObjectToTyped(gadget(map[string]any{"a": "x"}))
		if err != nil {
			return err.Error()
		}
		return ""
	})
	if _, err := tc.ObjectToTyped(gadget(map[string]any{"b": "y"})); err == nil || !strings.Contains(err.Error(), "field not declared in schema") {
		t.Fatalf("field b before the CRD has it: error = %v, want field not declared", err)
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["b"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		return env.Client.Update(ctx, crd)
	})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the converter knows the CRD's new field", 20*time.Second, func(context.Context) string {
		_, err := tc.ObjectToTyped(gadget(map[string]any{"a": "x", "b": "y"}))
		if err != nil {
			return err.Error()
		}
		return ""
	})
}
