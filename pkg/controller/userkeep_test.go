package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// userKeepAnnotations are the two ways a user keeps an object (issue 14, part 4).
var userKeepAnnotations = []struct {
	name, key, value, by string // by: how the Orphaned event names it
}{
	{"resource-policy", kdagv1alpha1.AnnotationResourcePolicy, kdagv1alpha1.ResourcePolicyKeep, "kdag.dev/resource-policy: keep"},
	{"keep alias", kdagv1alpha1.AnnotationKeep, "true", "kdag.dev/keep: true"},
}

// userKeep annotates the named ConfigMap as a user would, with field manager "user".
func (f *fixture) userKeep(name, key, value string) {
	f.t.Helper()
	f.update(&corev1.ConfigMap{}, name, func(o client.Object) {
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[key] = value
		o.SetAnnotations(ann)
	}, client.FieldOwner("user"))
}

// waitOrphanedEvent waits for a Normal Orphaned event about the Widget owner whose note names
// object and by, the annotation that kept it.
func (f *fixture) waitOrphanedEvent(owner, object, by string) eventsv1.Event {
	f.t.Helper()
	var found eventsv1.Event
	poll.True(f.t, "Orphaned event naming "+object+" and "+by, waitTimeout, func(context.Context) bool {
		for _, e := range f.events("Orphaned") {
			if e.Type == corev1.EventTypeNormal && e.Regarding.Name == owner && strings.Contains(e.Note, object) && strings.Contains(e.Note, by) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// reconcileUntil reconciles the named owner until cond holds, as the owner's requeues and
// retries would (a reconcile may meet a cache that is behind kdag's own last write), and fails
// the test after waitTimeout.
func (f *fixture) reconcileUntil(name, what string, cond func() bool) {
	f.t.Helper()
	poll.True(f.t, what, waitTimeout, func(context.Context) bool {
		_ = f.reconcile(name)
		return cond()
	})
}

// assertOrphaned checks that the named ConfigMap still exists, released: no owner reference
// (the garbage collector will not delete it), no kdag owner labels, kdag.dev/adopt naming the
// owner.
func (f *fixture) assertOrphaned(name string) {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	if f.notFound(cm, name) {
		f.t.Fatalf("ConfigMap %s was deleted, want it kept", name)
	}
	if len(cm.OwnerReferences) != 0 || cm.Labels[kdagv1alpha1.LabelOwnerUID] != "" || cm.Annotations[kdagv1alpha1.AnnotationAdopt] != "Widget/app" {
		f.t.Errorf("kept ConfigMap %s: owner references %v labels %v annotations %v; want none, no owner label, %s=Widget/app",
			name, cm.OwnerReferences, cm.Labels, cm.Annotations, kdagv1alpha1.AnnotationAdopt)
	}
}

// TestUserKeep_OwnerReferenceDroppedAndOrphanedOnPrune is issue 14, part 4: a user annotates an
// object kdag created (with a controller owner reference) keep. The next reconciles give the
// owner kdag's finalizer and then drop the object's owner reference (the keep annotation is read
// on the live object), keeping it kdag's (labels) and the owner Ready; when the object leaves the
// graph it is orphaned, not deleted, with a Normal event naming it and the annotation.
func TestUserKeep_OwnerReferenceDroppedAndOrphanedOnPrune(t *testing.T) {
	for _, a := range userKeepAnnotations {
		t.Run(a.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true})
			w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Components: []string{"a"}})
			f.settle("app")
			if cm := f.get(&corev1.ConfigMap{}, "extra-a"); len(cm.GetOwnerReferences()) != 1 {
				t.Fatalf("extra-a owner references %v, want kdag's", cm.GetOwnerReferences())
			}
			if got := f.get(&testapi.Widget{}, "app"); controllerutil.ContainsFinalizer(got, kdagv1alpha1.Finalizer) {
				t.Fatal("the owner holds kdag's finalizer before anything is kept")
			}

			f.userKeep("extra-a", a.key, a.value)
			f.reconcileUntil("app", "extra-a loses its owner reference", func() bool {
				return len(f.get(&corev1.ConfigMap{}, "extra-a").GetOwnerReferences()) == 0
			})
			f.settle("app")
			cm := f.get(&corev1.ConfigMap{}, "extra-a").(*corev1.ConfigMap)
			if len(cm.OwnerReferences) != 0 {
				t.Errorf("user-kept extra-a owner references %v, want none", cm.OwnerReferences)
			}
			if cm.Labels[kdagv1alpha1.LabelOwnerUID] != string(w.UID) || cm.Annotations[a.key] != a.value {
				t.Errorf("user-kept extra-a labels %v annotations %v; want kdag's labels and the user's annotation", cm.Labels, cm.Annotations)
			}
			if got := f.get(&testapi.Widget{}, "app"); !controllerutil.ContainsFinalizer(got, kdagv1alpha1.Finalizer) {
				t.Errorf("owner finalizers %v, want %s: kdag must orphan the kept object when the owner goes", got.GetFinalizers(), kdagv1alpha1.Finalizer)
			}
			if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
				t.Errorf("conditions %+v, want Ready=True", f.status("app").Conditions)
			}

			f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Components = nil })
			f.settle("app")
			f.assertOrphaned("extra-a")
			f.waitOrphanedEvent("app", "ConfigMap "+f.ns+"/extra-a", a.by)
		})
	}
}

// TestUserKeep_OrphanedOnOwnerDeletion is issue 14, part 4 with the finalizer path: the owner
// of a user-kept object (next to an author-kept one, Keep) is deleted, with and without ordered
// teardown, and whether or not a reconcile dropped the owner reference before: both objects are
// orphaned, not deleted, each with a Normal event naming it and the annotation.
func TestUserKeep_OrphanedOnOwnerDeletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []controller.Options
		// settled: a reconcile ran after the user's annotation (the owner reference is gone
		// before the deletion); otherwise the owner is deleted first.
		settled bool
	}{
		{name: "finalizer for the kept objects", settled: true},
		{name: "finalizer for the kept objects, annotated just before the deletion"},
		{name: "ordered teardown", opts: []controller.Options{{OrderedTeardown: true}}, settled: true},
		{name: "ordered teardown, annotated just before the deletion", opts: []controller.Options{{OrderedTeardown: true}}},
	} {
		for _, a := range userKeepAnnotations {
			t.Run(tc.name+"/"+a.name, func(t *testing.T) {
				f := newFixture(t, keepRM, tc.opts...)
				f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
				f.settle("app")
				f.userKeep("app-config", a.key, a.value)
				if tc.settled {
					f.reconcileUntil("app", "app-config loses its owner reference", func() bool {
						return len(f.get(&corev1.ConfigMap{}, "app-config").GetOwnerReferences()) == 0
					})
					f.settle("app")
					if cm := f.get(&corev1.ConfigMap{}, "app-config"); len(cm.GetOwnerReferences()) != 0 {
						t.Fatalf("user-kept app-config owner references %v, want none", cm.GetOwnerReferences())
					}
				}
				data := f.get(&corev1.Secret{}, "app-data").(*corev1.Secret)

				f.deleteAndFinalize("app", nil)
				f.assertOrphaned("app-config")
				kept := f.get(&corev1.Secret{}, "app-data").(*corev1.Secret)
				if kept.UID != data.UID || kept.Annotations[kdagv1alpha1.AnnotationAdopt] != "Widget/app" {
					t.Errorf("author-kept Secret: UID %s (was %s) annotations %v; want it orphaned", kept.UID, data.UID, kept.Annotations)
				}
				f.waitOrphanedEvent("app", "ConfigMap "+f.ns+"/app-config", a.by)
				f.waitOrphanedEvent("app", "Secret "+f.ns+"/app-data", "kdag.dev/resource-policy: keep")
			})
		}
	}
}
