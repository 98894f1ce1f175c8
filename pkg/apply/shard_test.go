package apply_test

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestDesired_CarriesOwnersShard (issue 17): an object's kdag.dev/shard label is its owner's,
// whatever the author's object says, so that the owner's shard caches it; and a change of the
// owner's shard leaves the desired hash as it is: the object is written anyway (it is not in the
// new shard's cache), and a new hash annotation would bump a Deployment's generation for nothing.
func TestDesired_CarriesOwnersShard(t *testing.T) {
	absent := "<none>"
	hashes := map[string]string{}
	for _, tc := range []struct {
		name                 string
		ownerShard, objShard string // absent: no label
		want                 string
	}{
		{"owner of shard a", "a", absent, "a"},
		{"owner of shard a, the author said b", "a", "b", "a"},
		{"unsharded owner", absent, absent, absent},
		{"unsharded owner, the author said b", absent, "b", absent},
		{"owner labelled with an empty value", "", absent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "uid-1"}}
			if tc.ownerShard != absent {
				owner.Labels = map[string]string{kdagv1alpha1.LabelShard: tc.ownerShard}
			}
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}}
			if tc.objShard != absent {
				obj.Labels = map[string]string{kdagv1alpha1.LabelShard: tc.objShard}
			}
			u, err := apply.Desired(apply.Owner{Object: owner, Kind: "Widget", Controller: "widgets"}, obj,
				corev1.SchemeGroupVersion.WithKind("ConfigMap"), scheme, apply.DesiredOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := u.GetLabels()[kdagv1alpha1.LabelShard]
			if !ok {
				got = absent
			}
			if got != tc.want {
				t.Errorf("kdag.dev/shard = %q, want %q", got, tc.want)
			}
			hashes[tc.want] = u.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash]
		})
	}
	if hashes["a"] != hashes[absent] || hashes["a"] != hashes[""] {
		t.Errorf("desired hashes by shard %v: want one hash whatever the shard", hashes)
	}
}

// TestWithOwnership_Shard: the one write to a create-only object gives it its owner's shard
// label, and removes the label when the owner has none (it moved out of its shard), leaving the
// rest of the object alone.
func TestWithOwnership_Shard(t *testing.T) {
	for _, tc := range []struct {
		name          string
		desired, live map[string]string
		want          map[string]string
	}{
		{"into shard a", map[string]string{"k": "v", kdagv1alpha1.LabelShard: "a"}, map[string]string{"user": "x"},
			map[string]string{"k": "v", "user": "x", kdagv1alpha1.LabelShard: "a"}},
		{"from a to b", map[string]string{kdagv1alpha1.LabelShard: "b"}, map[string]string{kdagv1alpha1.LabelShard: "a"},
			map[string]string{kdagv1alpha1.LabelShard: "b"}},
		{"out of shard a", map[string]string{"k": "v"}, map[string]string{"user": "x", kdagv1alpha1.LabelShard: "a"},
			map[string]string{"k": "v", "user": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired, live := &unstructured.Unstructured{}, &unstructured.Unstructured{}
			desired.SetLabels(tc.desired)
			live.SetLabels(tc.live)
			live.Object["data"] = map[string]any{"password": "kept"}
			e, err := apply.New(nil, nil, nil, apply.Options{FieldManager: "kdag"})
			if err != nil {
				t.Fatal(err)
			}
			got := e.WithOwnership(desired, live)
			if !maps.Equal(got.GetLabels(), tc.want) {
				t.Errorf("labels = %v, want %v", got.GetLabels(), tc.want)
			}
			if got.Object["data"].(map[string]any)["password"] != "kept" {
				t.Errorf("data = %v, want the live object's", got.Object["data"])
			}
			if !maps.Equal(live.GetLabels(), tc.live) {
				t.Errorf("WithOwnership changed live's labels to %v", live.GetLabels())
			}
		})
	}
}

// TestDesired_OwnersDriftReachesChildOwners: an owner's kdag.dev/drift annotation is copied onto
// the custom resources it applies (child owners, whose own reconciles then apply it to their
// objects), not onto built-in objects, and never over an annotation the author set.
func TestDesired_OwnersDriftReachesChildOwners(t *testing.T) {
	child := testapi.GroupVersion.WithKind("Widget")
	for _, tc := range []struct {
		name       string
		ownerDrift string // "" : none
		gvk        schema.GroupVersionKind
		own        string // the author's annotation on the object, "" none
		want       string // "" : absent
	}{
		{"child owner gets the owner's report", "report", child, "", "report"},
		{"child owner keeps the author's own", "report", child, "repair", "repair"},
		{"no annotation on the owner", "", child, "", ""},
		{"a built-in object does not get it", "report", corev1.SchemeGroupVersion.WithKind("ConfigMap"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "uid-1"}}
			if tc.ownerDrift != "" {
				owner.Annotations = map[string]string{kdagv1alpha1.AnnotationDrift: tc.ownerDrift}
			}
			var obj client.Object = &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}}
			if tc.gvk.Kind == "ConfigMap" {
				obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}}
			}
			if tc.own != "" {
				obj.SetAnnotations(map[string]string{kdagv1alpha1.AnnotationDrift: tc.own})
			}
			u, err := apply.Desired(apply.Owner{Object: owner, Kind: "Widget", Controller: "widgets"}, obj, tc.gvk, scheme, apply.DesiredOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := u.GetAnnotations()[kdagv1alpha1.AnnotationDrift]; got != tc.want {
				t.Errorf("kdag.dev/drift = %q, want %q", got, tc.want)
			}
		})
	}
}
