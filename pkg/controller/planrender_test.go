package controller_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestPlan_Render checks that Render gives each node the object a reconcile applies: kdag's
// labels and desired hash, and a dependencies hash over the blockers' content, a create-only
// blocker's taken from the cluster's object when there is one (issue 14's live plan).
func TestPlan_Render(t *testing.T) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app", UID: "u-1"}}
	plan, err := plan.NewPlan(t.Context(), secretApp{}, owner, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	ao := apply.Owner{Object: owner, Kind: "Widget", Controller: "app"}
	// The generated Secret as the cluster holds it: other values than the ones AddResources has.
	liveSecret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"namespace": "demo", "name": "app-secret"},
		"data": map[string]any{"key": "b3RoZXI="},
	}}
	for _, tc := range []struct {
		name   string
		live   *unstructured.Unstructured
		secret func(desired *unstructured.Unstructured) *unstructured.Unstructured
	}{
		{"create-only blocker absent: its desired content", nil, func(d *unstructured.Unstructured) *unstructured.Unstructured { return d }},
		{"create-only blocker on the cluster: its live content", liveSecret, func(*unstructured.Unstructured) *unstructured.Unstructured { return liveSecret }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, err := plan.Render(ao, scheme, func(id graph.NodeID) *unstructured.Unstructured {
				if id.Kind == "Secret" {
					return tc.live
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) != 3 {
				t.Fatalf("%d nodes, want 3", len(nodes))
			}
			secret, config, deploy := nodes[0], nodes[1], nodes[2]
			if got := deploy.Desired.GetLabels()[kdagv1alpha1.LabelOwnerUID]; got != "u-1" {
				t.Errorf("owner UID label %q, want u-1", got)
			}
			if deploy.Desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash] == "" {
				t.Error("no desired hash")
			}
			secretHash, err := resources.ContentHash(tc.secret(secret.Desired))
			if err != nil {
				t.Fatal(err)
			}
			configHash, err := resources.ContentHash(config.Desired)
			if err != nil {
				t.Fatal(err)
			}
			want := resources.CombineHashes(map[string]string{secret.ID.String(): secretHash, config.ID.String(): configHash})
			if got := deploy.Desired.GetAnnotations()[kdagv1alpha1.AnnotationDependenciesHash]; got != want {
				t.Errorf("dependencies hash %q, want %q", got, want)
			}
			// The same as the apply engine's preparation with that hash.
			direct, err := apply.Desired(ao, deploy.Object, deploy.GVK, scheme, apply.DesiredOptions{DependenciesHash: want})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := deploy.Desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash], direct.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash]; got != want {
				t.Errorf("desired hash %q, want apply.Desired's %q", got, want)
			}
		})
	}
}
