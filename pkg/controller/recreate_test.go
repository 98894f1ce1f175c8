package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// storageRM adds one StatefulSet whose volume claim template asks for spec.maxReplicas GiB: a
// change of it is an immutable-field change the API server refuses on update (issue 14). The
// StatefulSet is ready once it exists (envtest runs no StatefulSet controller).
func storageRM(opts ...controller.NodeOption) funcRM {
	return funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		labels := map[string]string{"app": w.Name}
		b.Add(&appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-db"},
			Spec: appsv1.StatefulSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:17"}}},
				},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceStorage: *resource.NewQuantity(int64(w.Spec.MaxReplicas)<<30, resource.BinarySI),
						}},
					},
				}},
			},
		}, append([]controller.NodeOption{controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil })}, opts...)...)
		return nil
	}}.owning(&appsv1.StatefulSet{})
}

// TestImmutableField_StalledOrRecreated changes a StatefulSet's volumeClaimTemplates, which the
// API server refuses on update. Without Recreate the owner is Stalled, naming the field and the
// option, and the object is left as it was; with Recreate the object is deleted, the node waits
// (the owner is not Ready meanwhile), and the next reconcile creates it as desired.
func TestImmutableField_StalledOrRecreated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []controller.NodeOption
		recreate bool
		// restart: the operator restarts once the old object is gone, before the creation: the
		// fresh reconciler does not remember the deletion, and waits all the same because the
		// owner's status listed the node (issue 30). lostStatus: the deleting reconcile's status
		// write never arrived (the process died right after the deletion), so that status still
		// says the node was Ready.
		restart, lostStatus bool
	}{
		{name: "default: Stalled"},
		{name: "Recreate", opts: []controller.NodeOption{controller.Recreate(metav1.DeletePropagationBackground)}, recreate: true},
		{name: "Recreate, the operator restarted before the creation",
			opts: []controller.NodeOption{controller.Recreate(metav1.DeletePropagationBackground)}, recreate: true, restart: true},
		{name: "Recreate, the operator restarted before the creation and before its status write",
			opts: []controller.NodeOption{controller.Recreate(metav1.DeletePropagationBackground)}, recreate: true, restart: true, lostStatus: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, storageRM(tc.opts...))
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
			f.settle("app")
			if !meta.IsStatusConditionTrue(f.status("app").Conditions, kdagv1alpha1.ConditionReady) {
				t.Fatalf("owner not Ready after the first deploy: %+v", f.status("app").Conditions)
			}
			before := f.get(&appsv1.StatefulSet{}, "app-db").(*appsv1.StatefulSet)

			f.updateWidget("app", func(w *testapi.Widget) { w.Spec.MaxReplicas = 2 })
			statusPath := "/apis/" + testapi.GroupVersion.String() + "/namespaces/" + f.ns + "/widgets/app/status"
			if tc.lostStatus {
				f.calls.FailNext("PATCH", statusPath, 10)
			}
			err := f.reconcile("app")
			f.calls.Clear()
			st := f.status("app")
			if tc.lostStatus {
				// The status still says what it said before the deletion; the reconcile's error is
				// its status write's, which the process that died never saw.
				if ready := condition(st, kdagv1alpha1.ConditionReady); err == nil || ready == nil || ready.Status != metav1.ConditionTrue {
					t.Fatalf("reconcile error %v, Ready %+v; want the status write refused and the status before the deletion (Ready)", err, ready)
				}
				if !f.notFound(&appsv1.StatefulSet{}, "app-db") && f.get(&appsv1.StatefulSet{}, "app-db").GetDeletionTimestamp() == nil {
					t.Fatal("the StatefulSet was not deleted for its re-creation")
				}
			} else if ready := condition(st, kdagv1alpha1.ConditionReady); ready == nil || ready.Status == metav1.ConditionTrue {
				t.Fatalf("Ready %+v after an immutable change, want False", ready)
			}
			if !tc.recreate {
				if !isTerminalErr(err) {
					t.Errorf("reconcile error %v, want a terminal error", err)
				}
				stalled := condition(st, kdagv1alpha1.ConditionStalled)
				if stalled == nil || stalled.Status != metav1.ConditionTrue ||
					!strings.Contains(stalled.Message, "spec") || !strings.Contains(stalled.Message, "immutable") || !strings.Contains(stalled.Message, "Recreate") {
					t.Errorf("Stalled %+v, want True naming the field, the cause and the Recreate option", stalled)
				}
				if after := f.get(&appsv1.StatefulSet{}, "app-db"); after.GetUID() != before.UID || after.GetResourceVersion() != before.ResourceVersion {
					t.Error("the StatefulSet was written or replaced without Recreate")
				}
				return
			}
			if err != nil && !tc.lostStatus {
				t.Fatalf("reconcile: %v", err)
			}
			if stalled := condition(st, kdagv1alpha1.ConditionStalled); stalled != nil {
				t.Errorf("Stalled %+v while re-creating, want none", stalled)
			}
			if ready := condition(st, kdagv1alpha1.ConditionReady); !tc.lostStatus && !strings.Contains(ready.Message, "re-created") {
				t.Errorf("Ready message %q, want it to say the object is being re-created", ready.Message)
			}
			f.waitEvent("app", corev1.EventTypeNormal, "Recreating")
			poll.True(t, "the old StatefulSet gone from the cache", waitTimeout, func(context.Context) bool {
				return apierrors.IsNotFound(f.cached(&appsv1.StatefulSet{}, "app-db"))
			})
			if tc.restart {
				f.restart()
			}
			// The first reconcile that finds it gone creates nothing yet: the old object's
			// controller may still write its status onto a new one of the name (apply's
			// recreations). It asks to come back once the wait is over.
			f.calls.Reset()
			res, err := f.reconcileResult("app")
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if writes, _ := f.calls.snapshot(); !apierrors.IsNotFound(f.cached(&appsv1.StatefulSet{}, "app-db")) || slices.ContainsFunc(writes, func(w string) bool {
				return strings.Contains(w, "statefulsets")
			}) {
				t.Errorf("the StatefulSet was created again as soon as the old one was gone (writes %v)", writes)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Second {
				t.Errorf("RequeueAfter %s, want the rest of the settle time", res.RequeueAfter)
			}
			poll.True(t, "the StatefulSet created again", waitTimeout, func(context.Context) bool {
				_ = f.reconcile("app")
				after := &appsv1.StatefulSet{}
				err := f.cl.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "app-db"}, after)
				return err == nil && after.UID != before.UID
			})
			f.settle("app")
			after := f.get(&appsv1.StatefulSet{}, "app-db").(*appsv1.StatefulSet)
			if got := after.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Value() != 2<<30 {
				t.Errorf("re-created claim template asks for %s, want 2Gi", got.String())
			}
			if !meta.IsStatusConditionTrue(f.status("app").Conditions, kdagv1alpha1.ConditionReady) {
				t.Errorf("owner not Ready after the re-creation: %+v", f.status("app").Conditions)
			}
		})
	}
}

// TestBuilder_RecreateOptions: Recreate shows in the plan with its propagation, and is a build
// error on a node that is never updated (CreateOnly), on a Reference, and with a propagation
// the API does not know.
func TestBuilder_RecreateOptions(t *testing.T) {
	cm := func() *corev1.ConfigMap { return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}} }
	for _, tc := range []struct {
		name    string
		add     func(b *controller.Graph)
		wantErr string
		want    string // the plan's node
	}{
		{"Orphan", func(b *controller.Graph) { b.Add(cm(), controller.Recreate(metav1.DeletePropagationOrphan)) }, "",
			"ConfigMap ns/c  (recreate on immutable change (Orphan))"},
		{"CreateOnly", func(b *controller.Graph) {
			b.Add(cm(), controller.CreateOnly(), controller.Recreate(metav1.DeletePropagationBackground))
		},
			"Recreate does not apply to a CreateOnly node", ""},
		{"Reference", func(b *controller.Graph) { b.Reference(cm(), controller.Recreate(metav1.DeletePropagationBackground)) },
			"a Reference takes no option but RequireKeys", ""},
		{"unknown propagation", func(b *controller.Graph) { b.Add(cm(), controller.Recreate("Later")) },
			"the propagation is Orphan, Background or Foreground", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assertOneNodePlan(t, tc.add, tc.wantErr, tc.want) })
	}
}
