package controller_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestUnownedObjects_TrackedByLabelsAndTornDown (8): an object in another namespace and a
// cluster-scoped one (a ClusterRole) cannot carry an owner reference to a namespaced owner.
// kdag tracks them by its labels: the owner gets kdag's finalizer without OrderedTeardown, a
// change of such an object resumes the owner (its node waited for it), and deleting the owner
// deletes them and only then lets the owner go.
func TestUnownedObjects_TrackedByLabelsAndTornDown(t *testing.T) {
	other := env.Namespace(t)
	roleName := "kdag-test-" + other
	rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}})
		remote := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: w.Name + "-remote"}},
			controller.ReadyWhen(func(live client.Object) (bool, error) { return live.GetAnnotations()["ready"] == "true", nil }))
		b.Add(&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: roleName},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
		}, controller.DependsOn(remote))
		return nil
	}}
	f := startFixture(t, fixtureConfig{register: true, namespaces: []string{other}}, rm.owning(&rbacv1.ClusterRole{}))
	ctx := context.Background()
	w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})

	remote := &corev1.ConfigMap{}
	poll.True(t, "the ConfigMap in the other namespace exists", waitTimeout, func(context.Context) bool {
		return f.cl.Get(ctx, client.ObjectKey{Namespace: other, Name: "app-remote"}, remote) == nil
	})
	if remote.Labels[kdagv1alpha1.LabelOwnerUID] != string(w.UID) || len(remote.OwnerReferences) != 0 {
		t.Errorf("ConfigMap %s/app-remote: labels %v owner references %v; want kdag's labels and none", other, remote.Labels, remote.OwnerReferences)
	}
	if got := f.get(&testapi.Widget{}, "app"); !controllerutil.ContainsFinalizer(got, kdagv1alpha1.Finalizer) {
		t.Errorf("owner finalizers %v, want %s: kdag must delete the objects the garbage collector cannot", got.GetFinalizers(), kdagv1alpha1.Finalizer)
	}
	// The ConfigMap exists before the reconcile that created it writes the owner's status: wait
	// for the status, not only the object.
	poll.Until(t, "the owner's Ready condition names ConfigMap "+other+"/app-remote", waitTimeout, func(context.Context) string {
		if c := condition(f.status("app"), kdagv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "app-remote") {
			return fmt.Sprintf("Ready condition %+v", c)
		}
		return ""
	})

	// Nothing but this change wakes the owner: its node resumes and the ClusterRole follows.
	remote.Annotations = map[string]string{"ready": "true"}
	if err := f.cl.Update(ctx, remote, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the owner is Ready", waitTimeout, func(context.Context) bool { return isTrue(f.status("app"), kdagv1alpha1.ConditionReady) })
	role := &rbacv1.ClusterRole{}
	if err := f.cl.Get(ctx, client.ObjectKey{Name: roleName}, role); err != nil {
		t.Fatal(err)
	}
	if role.Labels[kdagv1alpha1.LabelOwnerUID] != string(w.UID) || len(role.OwnerReferences) != 0 {
		t.Errorf("ClusterRole: labels %v owner references %v; want kdag's labels and none", role.Labels, role.OwnerReferences)
	}

	if err := f.cl.Delete(ctx, f.get(&testapi.Widget{}, "app")); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the owner is gone", waitTimeout, func(context.Context) bool { return f.notFound(&testapi.Widget{}, "app") })
	if err := f.cl.Get(ctx, client.ObjectKey{Namespace: other, Name: "app-remote"}, &corev1.ConfigMap{}); err == nil {
		t.Errorf("ConfigMap %s/app-remote survived its owner", other)
	}
	if err := f.cl.Get(ctx, client.ObjectKey{Name: roleName}, &rbacv1.ClusterRole{}); err == nil {
		t.Error("the ClusterRole survived its owner")
	}
}

// keepRM: a ConfigMap, a generated create-only Secret "<name>-data" that is kept, and, while
// spec.components holds "extra", a kept ConfigMap "<name>-extra".
var keepRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}})
	b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-data"}, StringData: map[string]string{"key": rand.Text()}},
		controller.CreateOnly(), controller.Keep())
	for _, c := range w.Spec.Components {
		if c == "extra" {
			b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-extra"}}, controller.Keep())
		}
	}
	return nil
}}

// TestKeep_OrphanedNotDeletedAndAdoptedAgain (12): a kept object gets no owner reference, is
// orphaned (kdag's labels removed, kdagv1alpha1.AnnotationAdopt naming the owner) when its node leaves the
// graph or its owner is deleted, with or without ordered teardown, and is adopted again, data
// unchanged, by an owner of the same kind and name created later.
func TestKeep_OrphanedNotDeletedAndAdoptedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []controller.Options
	}{
		{"finalizer for the kept objects", nil},
		{"ordered teardown", []controller.Options{{OrderedTeardown: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, keepRM, tc.opts...)
			w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Components: []string{"extra"}})
			f.settle("app")
			data := f.get(&corev1.Secret{}, "app-data").(*corev1.Secret)
			if data.Annotations[kdagv1alpha1.AnnotationResourcePolicy] != kdagv1alpha1.ResourcePolicyKeep || len(data.OwnerReferences) != 0 {
				t.Errorf("kept Secret: annotations %v owner references %v; want %s=%s and none",
					data.Annotations, data.OwnerReferences, kdagv1alpha1.AnnotationResourcePolicy, kdagv1alpha1.ResourcePolicyKeep)
			}
			if got := f.get(&testapi.Widget{}, "app"); !controllerutil.ContainsFinalizer(got, kdagv1alpha1.Finalizer) {
				t.Errorf("owner finalizers %v, want %s", got.GetFinalizers(), kdagv1alpha1.Finalizer)
			}

			// The node leaves the graph: orphaned, not deleted.
			f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Components = nil })
			f.settle("app")
			extra := f.get(&corev1.ConfigMap{}, "app-extra").(*corev1.ConfigMap)
			if extra.Labels[kdagv1alpha1.LabelOwnerUID] != "" || extra.Labels[kdagv1alpha1.LabelController] != "" || extra.Annotations[kdagv1alpha1.AnnotationAdopt] != "Widget/app" {
				t.Errorf("kept ConfigMap after it left the graph: labels %v annotations %v; want no kdag label and %s=Widget/app",
					extra.Labels, extra.Annotations, kdagv1alpha1.AnnotationAdopt)
			}
			f.waitEvent("app", corev1.EventTypeNormal, "Orphaned")

			// The owner is deleted: the kept Secret stays, released, with its data.
			f.deleteAndFinalize("app", nil)
			kept := f.get(&corev1.Secret{}, "app-data").(*corev1.Secret)
			if kept.UID != data.UID || string(kept.Data["key"]) != string(data.Data["key"]) {
				t.Fatal("the kept Secret was replaced or changed by the owner's deletion")
			}
			if kept.Labels[kdagv1alpha1.LabelOwnerUID] != "" || kept.Annotations[kdagv1alpha1.AnnotationAdopt] != "Widget/app" {
				t.Errorf("kept Secret after the owner's deletion: labels %v annotations %v; want no owner label and %s=Widget/app",
					kept.Labels, kept.Annotations, kdagv1alpha1.AnnotationAdopt)
			}

			// envtest runs no garbage collector: delete what it would, the owned ConfigMap.
			if cm := (&corev1.ConfigMap{}); !f.notFound(cm, "app-config") {
				if err := f.cl.Delete(context.Background(), f.get(cm, "app-config")); err != nil {
					t.Fatal(err)
				}
			}

			// A new owner of the same name adopts it: same object, same data, its labels.
			again := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
			if again.UID == w.UID {
				t.Fatal("the re-created owner has the old UID")
			}
			f.settle("app")
			adopted := f.get(&corev1.Secret{}, "app-data").(*corev1.Secret)
			if adopted.UID != data.UID || string(adopted.Data["key"]) != string(data.Data["key"]) {
				t.Error("the re-created owner did not reuse the kept Secret and its data")
			}
			if adopted.Labels[kdagv1alpha1.LabelOwnerUID] != string(again.UID) {
				t.Errorf("adopted Secret labels %v, want owner UID %s", adopted.Labels, again.UID)
			}
			if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
				t.Errorf("conditions %+v, want Ready=True", f.status("app").Conditions)
			}
		})
	}
}
