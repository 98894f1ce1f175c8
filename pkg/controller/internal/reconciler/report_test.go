package reconciler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// TestReport_GetAndState: Report's look-ups by type, namespace (the owner's when empty) and
// name; a type outside the scheme is an error, not a panic.
func TestReport_GetAndState(t *testing.T) {
	applied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v"}}
	u, err := resources.ToUnstructured(applied, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	r := Report{scheme: scheme, namespace: "ns", nodes: []nodeReport{
		{id: graph.NodeID{Kind: "ConfigMap", Namespace: "ns", Name: "cfg"}, state: kdagv1alpha1.NodeReady, object: u},
		{id: graph.NodeID{Kind: "Secret", Namespace: "ns", Name: "key"}, state: kdagv1alpha1.NodeBlocked},
	}}
	type unknown struct{ corev1.ConfigMap } // not in the scheme
	for _, tc := range []struct {
		name      string
		obj       client.Object
		wantState kdagv1alpha1.NodeState
		wantFound bool
		wantErr   bool
	}{
		{"applied object, namespace defaulted to the owner's", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, kdagv1alpha1.NodeReady, true, false},
		{"applied object, namespace given", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}}, kdagv1alpha1.NodeReady, true, false},
		{"other namespace", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "cfg"}}, "", false, false},
		{"same name, other kind", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, "", false, false},
		{"node without an object", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key"}}, kdagv1alpha1.NodeBlocked, false, false},
		{"type not in the scheme", &unknown{ConfigMap: corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}}, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.State(tc.obj); got != tc.wantState {
				t.Errorf("State = %q, want %q", got, tc.wantState)
			}
			found, err := r.Get(tc.obj)
			if found != tc.wantFound || (err != nil) != tc.wantErr {
				t.Fatalf("Get = %v, %v; want %v, error %v", found, err, tc.wantFound, tc.wantErr)
			}
			if found && tc.obj.(*corev1.ConfigMap).Data["k"] != "v" {
				t.Errorf("Get filled %+v, want the applied object's data", tc.obj)
			}
		})
	}
}
