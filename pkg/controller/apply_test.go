package controller_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestApply_ManagedFieldsHaveApplyEntryOfFieldManager(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
	f.settle("app")

	tests := []struct {
		name        string
		obj         client.Object
		objName     string
		subresource string
	}{
		{name: "Deployment", obj: &appsv1.Deployment{}, objName: "app"},
		{name: "ConfigMap", obj: &corev1.ConfigMap{}, objName: "app-config"},
		{name: "Service", obj: &corev1.Service{}, objName: "app"},
		{name: "Secret (create-only)", obj: &corev1.Secret{}, objName: "app-secret"},
		{name: "Widget status", obj: &testapi.Widget{}, objName: "app", subresource: "status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := f.get(tt.obj, tt.objName)
			var entries []string
			found := false
			for _, mf := range obj.GetManagedFields() {
				entries = append(entries, mf.Manager+"/"+string(mf.Operation)+"/"+mf.Subresource)
				if mf.Manager == f.fieldManager && mf.Subresource == tt.subresource {
					if mf.Operation != metav1.ManagedFieldsOperationApply {
						t.Errorf("field manager %s wrote with operation %s, want Apply", mf.Manager, mf.Operation)
					}
					found = true
				}
			}
			if !found {
				t.Fatalf("managed fields %v: no Apply entry of %s (subresource %q)", entries, f.fieldManager, tt.subresource)
			}
		})
	}
}

func TestDrift_ForeignChangeIsRepaired(t *testing.T) {
	tests := []struct {
		name    string
		obj     func() client.Object
		objName string
		edit    func(client.Object)
		// repaired reports whether obj (from the API server) holds kdag's value again.
		repaired func(client.Object) bool
	}{
		{
			name: "Deployment spec.replicas changed", obj: func() client.Object { return &appsv1.Deployment{} }, objName: "app",
			edit:     func(o client.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptr.To[int32](5) },
			repaired: func(o client.Object) bool { return ptr.Deref(o.(*appsv1.Deployment).Spec.Replicas, 0) == 2 },
		},
		{
			name: "ConfigMap data value changed", obj: func() client.Object { return &corev1.ConfigMap{} }, objName: "app-config",
			edit:     func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = "edited" },
			repaired: func(o client.Object) bool { return o.(*corev1.ConfigMap).Data["k"] == "v" },
		},
		{
			// A removal leaves no foreign managed-fields entry; kdag's own entry shrinks.
			name: "ConfigMap data key removed", obj: func() client.Object { return &corev1.ConfigMap{} }, objName: "app-config",
			edit:     func(o client.Object) { delete(o.(*corev1.ConfigMap).Data, "k") },
			repaired: func(o client.Object) bool { return o.(*corev1.ConfigMap).Data["k"] == "v" },
		},
		{
			name: "Service label removed", obj: func() client.Object { return &corev1.Service{} }, objName: "app",
			edit:     func(o client.Object) { delete(o.(*corev1.Service).Labels, kdagv1alpha1.LabelManagedBy) },
			repaired: func(o client.Object) bool { return o.GetLabels()[kdagv1alpha1.LabelManagedBy] == "kdag" },
		},
	}
	for _, tt := range tests {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", tt.name, restart), func(t *testing.T) {
				f := newFixture(t, widgetRM{readyDeployment: true})
				f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Replicas: ptr.To[int32](2), Data: map[string]string{"k": "v"}})
				f.settle("app")

				edited := f.foreignUpdate(tt.obj(), tt.objName, tt.edit)
				if tt.repaired(edited) {
					t.Fatalf("the foreign edit did not change the object")
				}
				if restart {
					f.restart()
				}
				f.calls.Reset()
				if err := f.reconcile("app"); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
				if writes := f.objectWrites(); len(writes) != 1 {
					t.Errorf("repairing reconcile wrote %v, want exactly one apply", writes)
				}
				live := f.get(tt.obj(), tt.objName)
				if !tt.repaired(live) {
					t.Fatalf("after reconcile the foreign edit is still there: %+v", live)
				}
				ev := f.waitEvent("app", corev1.EventTypeNormal, "DriftRepaired")
				if !strings.Contains(ev.Note, tt.objName) {
					t.Errorf("DriftRepaired event note %q does not name %s", ev.Note, tt.objName)
				}

				// Once the cache holds the repaired object, nothing is left to do.
				f.waitCachedVersion(tt.obj(), tt.objName, live.GetResourceVersion())
				f.calls.Reset()
				if err := f.reconcile("app"); err != nil {
					t.Fatalf("reconcile after repair: %v", err)
				}
				if writes := f.objectWrites(); len(writes) != 0 {
					t.Fatalf("reconcile after repair wrote %v, want no write", writes)
				}
			})
		}
	}
}

func TestDrift_ForeignAnnotationDoesNotLoop(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
			f.settle("app")

			f.foreignUpdate(&appsv1.Deployment{}, "app", func(o client.Object) {
				ann := o.GetAnnotations()
				ann["other.tool/x"] = "y"
				o.SetAnnotations(ann)
			})
			if restart {
				f.restart()
			}
			f.calls.Reset()
			for range 2 {
				if err := f.reconcile("app"); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			if writes := f.objectWrites(); len(writes) != 0 {
				t.Fatalf("2 reconciles after a foreign annotation wrote %v, want no write", writes)
			}
			if got := f.get(&appsv1.Deployment{}, "app").GetAnnotations()["other.tool/x"]; got != "y" {
				t.Fatalf("annotation other.tool/x = %q, want the foreign value y kept", got)
			}
		})
	}
}

func TestChecksum_DependencyContentRollsPodTemplate(t *testing.T) {
	tests := []struct {
		name        string
		change      func(*testapi.Widget)
		wantRoll    bool // the pod template's dependencies hash changes
		wantConfig  map[string]string
		wantReplica int32
	}{
		{
			name:     "spec.data changes the ConfigMap",
			change:   func(w *testapi.Widget) { w.Spec.Data = map[string]string{"k": "v2"} },
			wantRoll: true, wantConfig: map[string]string{"k": "v2"}, wantReplica: 1,
		},
		{
			name:     "spec.replicas changes only the Deployment",
			change:   func(w *testapi.Widget) { w.Spec.Replicas = ptr.To[int32](3) },
			wantRoll: false, wantConfig: map[string]string{"k": "v"}, wantReplica: 3,
		},
		{
			name:     "spec.maxReplicas is not used by the graph",
			change:   func(w *testapi.Widget) { w.Spec.MaxReplicas = 7 },
			wantRoll: false, wantConfig: map[string]string{"k": "v"}, wantReplica: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
			f.settle("app")
			before := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment).Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash]
			if before == "" {
				t.Fatalf("pod template has no %s annotation", kdagv1alpha1.AnnotationDependenciesHash)
			}

			w := f.updateWidget("app", tt.change)
			f.settle("app")

			d := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
			after := d.Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash]
			if rolled := after != before; rolled != tt.wantRoll {
				t.Errorf("pod template %s %s -> %s: rolled = %v, want %v", kdagv1alpha1.AnnotationDependenciesHash, before, after, rolled, tt.wantRoll)
			}
			if got := d.Annotations[kdagv1alpha1.AnnotationDependenciesHash]; got != after {
				t.Errorf("Deployment annotation %s = %s, want the pod template's %s", kdagv1alpha1.AnnotationDependenciesHash, got, after)
			}
			if got := ptr.Deref(d.Spec.Replicas, 0); got != tt.wantReplica {
				t.Errorf("Deployment replicas = %d, want %d", got, tt.wantReplica)
			}
			cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap)
			if !maps.Equal(cm.Data, tt.wantConfig) {
				t.Errorf("ConfigMap data = %v, want %v", cm.Data, tt.wantConfig)
			}
			if st := f.status("app"); st.ObservedGeneration != w.Generation {
				t.Errorf("status.observedGeneration = %d, want %d", st.ObservedGeneration, w.Generation)
			}
		})
	}
}

func TestCreateOnly_ForeignChangeKeptAndFeedsDependents(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
	f.settle("app")
	before := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment).Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash]
	if generated := f.get(&corev1.Secret{}, "app-secret").(*corev1.Secret).Data["password"]; len(generated) == 0 {
		t.Fatal("secret has no generated password")
	}

	f.foreignUpdate(&corev1.Secret{}, "app-secret", func(o client.Object) {
		o.(*corev1.Secret).Data["password"] = []byte("rotated-by-hand")
	})
	writes := f.settle("app")
	deploy := "PATCH /apis/apps/v1/namespaces/" + f.ns + "/deployments/app"
	if !slices.Contains(writes, deploy) {
		t.Errorf("writes %v, want the Deployment applied with the secret's new hash", writes)
	}
	for _, w := range writes {
		if strings.Contains(w, "/secrets/") {
			t.Errorf("create-only secret written: %s", w)
		}
	}

	if got := string(f.get(&corev1.Secret{}, "app-secret").(*corev1.Secret).Data["password"]); got != "rotated-by-hand" {
		t.Errorf("create-only secret password = %q, want the foreign value kept", got)
	}
	after := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment).Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash]
	if after == before {
		t.Errorf("pod template %s stayed %s after the create-only secret's data changed, want a new hash", kdagv1alpha1.AnnotationDependenciesHash, after)
	}
}
