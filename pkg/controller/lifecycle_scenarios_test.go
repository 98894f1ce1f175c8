package controller_test

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// The seven node-lifecycle scenarios where two options meet. Each failed on 05afa85 (before the
// one-call apply engine); the combination test (lifecycle_matrix_test.go) covers the rest of the
// cross product.

// generatedSecret is a create-only Secret node named "<owner>-key" with a new random value on
// every render (a password generator), kept when the owner's components hold "retain": the
// deletion policy of the reference operator's generated keys.
func generatedSecret(w *testapi.Widget, b *controller.Graph) {
	opts := []controller.NodeOption{controller.CreateOnly()}
	if slices.Contains(w.Spec.Components, "retain") {
		opts = append(opts, controller.Keep())
	}
	b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-key"}, StringData: map[string]string{"key": rand.Text()}}, opts...)
}

// assertKeptMetadata checks obj's ownership metadata: kept (no owner reference to the owner, so
// no garbage collection with it) or not (kdag's controller owner reference), with kdag's
// kdag.dev/resource-policy annotation exactly when wantAnnotation.
func assertKeptMetadata(t *testing.T, obj client.Object, owner client.Object, kept, wantAnnotation bool) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	switch {
	case kept && ref != nil:
		t.Errorf("%s: controller owner reference %s/%s, want none while it is kept", obj.GetName(), ref.Kind, ref.Name)
	case !kept && (ref == nil || ref.UID != owner.GetUID()):
		t.Errorf("%s: controller owner reference %v, want the owner's", obj.GetName(), ref)
	}
	has := obj.GetAnnotations()[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep
	if has != wantAnnotation {
		t.Errorf("%s: annotations %v, want %s: keep %v", obj.GetName(), obj.GetAnnotations(), kdagv1alpha1.AnnotationResourcePolicy, wantAnnotation)
	}
}

// TestLifecycle_KeepAddedToCreateOnly is scenario 1 (data loss): a generated key created under
// deletionPolicy Delete, switched to Retain, must lose its owner reference (else the garbage
// collector deletes the key that opens the retained data) and gain kdag's keep annotation, and
// get both back when switched to Delete again; its data is never rewritten.
func TestLifecycle_KeepAddedToCreateOnly(t *testing.T) {
	f := newFixture(t, funcRM{add: func(w *testapi.Widget, b *controller.Graph) error { generatedSecret(w, b); return nil }})
	w := f.widget("db", testapi.WidgetSpec{})
	f.settle("db")
	first := f.get(&corev1.Secret{}, "db-key").(*corev1.Secret)
	assertKeptMetadata(t, first, w, false, false)

	for _, step := range []struct {
		components []string
		kept       bool
	}{{[]string{"retain"}, true}, {nil, false}, {[]string{"retain"}, true}} {
		f.updateWidget("db", func(w *testapi.Widget) { w.Spec.Components = step.components })
		f.settle("db")
		s := f.get(&corev1.Secret{}, "db-key").(*corev1.Secret)
		assertKeptMetadata(t, s, w, step.kept, step.kept)
		if s.UID != first.UID || string(s.Data["key"]) != string(first.Data["key"]) {
			t.Fatalf("components %v: the generated key was re-created or rewritten", step.components)
		}
		if !isTrue(f.status("db"), kdagv1alpha1.ConditionReady) {
			t.Errorf("components %v: conditions %+v, want Ready", step.components, f.status("db").Conditions)
		}
	}
}

// TestLifecycle_UserKeepOnCreateOnly is scenario 2: a user's keep on a generated Secret drops
// its owner reference within a few reconciles (as it does for any other object), so that a
// foreground deletion of the owner cannot let the garbage collector take it; its data stays.
func TestLifecycle_UserKeepOnCreateOnly(t *testing.T) {
	f := newFixture(t, funcRM{add: func(w *testapi.Widget, b *controller.Graph) error { generatedSecret(w, b); return nil }})
	w := f.widget("app", testapi.WidgetSpec{})
	f.settle("app")
	before := f.get(&corev1.Secret{}, "app-key").(*corev1.Secret)
	f.update(&corev1.Secret{}, "app-key", func(o client.Object) {
		o.SetAnnotations(map[string]string{kdagv1alpha1.AnnotationKeep: "true"})
	}, client.FieldOwner("user"))
	for range 3 {
		_ = f.reconcile("app")
	}
	f.settle("app")
	s := f.get(&corev1.Secret{}, "app-key").(*corev1.Secret)
	assertKeptMetadata(t, s, w, true, false)
	if string(s.Data["key"]) != string(before.Data["key"]) || s.Annotations[kdagv1alpha1.AnnotationKeep] != "true" {
		t.Errorf("kept Secret data changed or the user's annotation is gone: %v", s.Annotations)
	}
}

// immutableConfigMap is a ConfigMap node "<owner>-conf" marked immutable (the API server then
// refuses any change of its data), with data from the owner's spec and the options.
func immutableConfigMap(w *testapi.Widget, b *controller.Graph, opts ...controller.NodeOption) controller.Node {
	return b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-conf"}, Data: w.Spec.Data, Immutable: ptr.To(true)}, opts...)
}

// TestLifecycle_RecreateOfKeptObjectIsStalled is scenario 3: an immutable change of an object a
// user keeps is not done by deleting it (Recreate): the owner is Stalled, naming the object and
// the annotation, and the object stays, same UID, annotation and data.
func TestLifecycle_RecreateOfKeptObjectIsStalled(t *testing.T) {
	f := newFixture(t, funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		immutableConfigMap(w, b, controller.Recreate(metav1.DeletePropagationBackground))
		return nil
	}})
	f.widget("app", testapi.WidgetSpec{Data: map[string]string{"v": "1"}})
	f.settle("app")
	f.update(&corev1.ConfigMap{}, "app-conf", func(o client.Object) {
		o.SetAnnotations(map[string]string{kdagv1alpha1.AnnotationKeep: "true"})
	}, client.FieldOwner("user"))
	f.settle("app")
	before := f.get(&corev1.ConfigMap{}, "app-conf")

	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"v": "2"} })
	for range 3 {
		_ = f.reconcile("app")
	}
	cm := &corev1.ConfigMap{}
	if f.notFound(cm, "app-conf") || cm.UID != before.GetUID() {
		t.Fatalf("the kept ConfigMap was deleted (UID %s, was %s)", cm.UID, before.GetUID())
	}
	if cm.Data["v"] != "1" || cm.Annotations[kdagv1alpha1.AnnotationKeep] != "true" {
		t.Errorf("kept ConfigMap data %v annotations %v, want v=1 and the user's keep", cm.Data, cm.Annotations)
	}
	st := condition(f.status("app"), kdagv1alpha1.ConditionStalled)
	if st == nil || st.Status != metav1.ConditionTrue || !strings.Contains(st.Message, "ConfigMap "+f.ns+"/app-conf") ||
		!strings.Contains(st.Message, "kdag.dev/keep: true") {
		t.Errorf("Stalled = %+v, want True naming the ConfigMap and kdag.dev/keep: true", st)
	}
}

// TestLifecycle_AdoptKeepTakesOverForeignController is scenario 4: Adopt + Keep takes over an
// object another controller holds (else the garbage collector deletes it with that controller),
// once: an unchanged owner then costs no write.
func TestLifecycle_AdoptKeepTakesOverForeignController(t *testing.T) {
	f := newFixture(t, funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-shared"}, Data: map[string]string{"k": "v"}}, controller.Adopt(), controller.Keep())
		return nil
	}})
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "other-controller"}}
	if err := f.cl.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-shared",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}}}}
	if err := f.cl.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	w := f.widget("app", testapi.WidgetSpec{})
	f.settle("app")
	f.calls.Reset()
	for range 5 {
		if err := f.reconcile("app"); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	if writes := f.objectWrites(); len(writes) > 0 {
		t.Errorf("5 reconciles of an unchanged owner wrote %v, want nothing", writes)
	}
	cm := f.get(&corev1.ConfigMap{}, "app-shared")
	assertKeptMetadata(t, cm, w, true, true)
	if cm.GetLabels()[kdagv1alpha1.LabelOwnerUID] != string(w.UID) || cm.GetUID() != foreign.UID {
		t.Errorf("adopted ConfigMap labels %v UID %s: want the owner's labels on the same object", cm.GetLabels(), cm.GetUID())
	}
}

// claimGraph is a claim "<owner>-data" of the size in spec.data["size"] on class, and a
// ConfigMap "<owner>-pod" (its consumer's stand-in) that depends on it, with data["pod"].
func claimGraph(class string) funcRM {
	return funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		claim := b.Add(&corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(class),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(w.Spec.Data["size"])}},
			},
		})
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-pod"}, Data: map[string]string{"pod": w.Spec.Data["pod"]}}, controller.DependsOn(claim))
		return nil
	}}.owning(&corev1.PersistentVolumeClaim{})
}

// TestLifecycle_PendingClaimGrowsOnceBound is scenario 5: growing a claim that is not bound yet
// (WaitForFirstConsumer) is no immutable-field refusal: the owner waits (never Stalled), the
// consumer gets the rest of the same edit (else it deadlocks: the claim binds only once its
// consumer runs), the consumer's pods do not roll for the size, and the claim grows once bound.
func TestLifecycle_PendingClaimGrowsOnceBound(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "expandable-"}, Provisioner: "example.com/none",
		AllowVolumeExpansion: ptr.To(true), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	if err := env.Client.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	f := newFixture(t, claimGraph(class.Name))
	f.widget("db", testapi.WidgetSpec{Data: map[string]string{"size": "1Gi", "pod": "v1"}})
	f.settle("db")
	hashBefore := f.get(&corev1.ConfigMap{}, "db-pod").GetAnnotations()[kdagv1alpha1.AnnotationDependenciesHash]

	f.updateWidget("db", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"size": "2Gi", "pod": "v2"} })
	f.reconcileUntil("db", "the consumer gets the edit while the claim is Pending", func() bool {
		return f.get(&corev1.ConfigMap{}, "db-pod").(*corev1.ConfigMap).Data["pod"] == "v2"
	})
	f.settle("db")
	st := f.status("db")
	if c := condition(st, kdagv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("Stalled while the claim is not bound: %s", c.Message)
	}
	if isTrue(st, kdagv1alpha1.ConditionReady) || st.WaitingFor == nil || st.WaitingFor.Name != "db-data" {
		t.Errorf("Ready %v waitingFor %+v, want not Ready, waiting for the claim db-data", isTrue(st, kdagv1alpha1.ConditionReady), st.WaitingFor)
	}
	if c := condition(st, kdagv1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "once it is bound") {
		t.Errorf("Ready condition %+v, want a message saying the claim grows once it is bound", c)
	}
	if got := f.get(&corev1.ConfigMap{}, "db-pod").GetAnnotations()[kdagv1alpha1.AnnotationDependenciesHash]; got != hashBefore {
		t.Errorf("the consumer's dependencies hash changed (%s -> %s): a claim's size must roll no pods", hashBefore, got)
	}

	bound := f.get(&corev1.PersistentVolumeClaim{}, "db-data").(*corev1.PersistentVolumeClaim)
	bound.Status.Phase = corev1.ClaimBound
	if err := f.cl.Status().Update(context.Background(), bound); err != nil {
		t.Fatal(err)
	}
	f.waitCachedVersion(&corev1.PersistentVolumeClaim{}, "db-data", bound.ResourceVersion)
	f.reconcileUntil("db", "the claim grows once bound", func() bool {
		c := f.get(&corev1.PersistentVolumeClaim{}, "db-data").(*corev1.PersistentVolumeClaim)
		return c.Spec.Resources.Requests.Storage().Cmp(resource.MustParse("2Gi")) == 0
	})
	f.settle("db")
	if !isTrue(f.status("db"), kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready once the claim grew", f.status("db").Conditions)
	}
}

// TestLifecycle_PrunedObjectHeldByFinalizer is scenario 6: an object that left the graph and is
// held by another finalizer (a claim in use, a load balancer's clean-up) keeps the owner from
// Ready, named in the condition and in waitingFor, until it is gone.
func TestLifecycle_PrunedObjectHeldByFinalizer(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{Components: []string{"a"}})
	f.settle("app")
	const hold = "test.kdag.dev/hold"
	f.update(&corev1.ConfigMap{}, "extra-a", func(o client.Object) { o.SetFinalizers([]string{hold}) })

	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Components = nil })
	f.reconcileUntil("app", "extra-a is being deleted", func() bool {
		return f.get(&corev1.ConfigMap{}, "extra-a").GetDeletionTimestamp() != nil
	})
	f.settle("app")
	st := f.status("app")
	ready := condition(st, kdagv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "extra-a") || !strings.Contains(ready.Message, hold) {
		t.Errorf("Ready = %+v, want False naming extra-a and the finalizer %s", ready, hold)
	}
	if st.WaitingFor == nil || st.WaitingFor.Name != "extra-a" {
		t.Errorf("waitingFor %+v, want extra-a", st.WaitingFor)
	}
	// The wait is bounded by a recheck, not by the deletion event alone.
	res, err := f.reconcileResult("app")
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > controller.TeardownRecheck {
		t.Errorf("a reconcile while extra-a is held: %+v, %v; want a requeue within %s", res, err, controller.TeardownRecheck)
	}

	held := f.get(&corev1.ConfigMap{}, "extra-a")
	held.SetFinalizers(nil)
	if err := f.cl.Update(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "extra-a is gone", waitTimeout, func(context.Context) bool { return f.notFound(&corev1.ConfigMap{}, "extra-a") })
	f.reconcileUntil("app", "Ready once extra-a is gone", func() bool { return isTrue(f.status("app"), kdagv1alpha1.ConditionReady) })
	if st := f.status("app"); st.WaitingFor != nil {
		t.Errorf("waitingFor %+v on a Ready owner", st.WaitingFor)
	}
}

// TestLifecycle_WaitingForIsStable is scenario 7: with two independent nodes waiting, an
// unchanged owner's reconciles keep waitingFor (and its since) as it is: no status write.
func TestLifecycle_WaitingForIsStable(t *testing.T) {
	held := controller.ReadyWhen(func(client.Object) (bool, error) { return false, &resources.NotReadyError{Reason: "held"} })
	f := newFixture(t, funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		for _, n := range []string{"a", "b", "c"} {
			b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-" + n}}, held)
		}
		return nil
	}})
	f.widget("app", testapi.WidgetSpec{})
	f.settle("app")
	first := f.status("app").WaitingFor
	if first == nil {
		t.Fatal("waitingFor is empty while three nodes wait")
	}
	f.calls.Reset()
	for range 30 {
		_ = f.reconcile("app")
	}
	writes, _ := f.calls.snapshot()
	if len(writes) > 0 {
		t.Errorf("30 reconciles of an unchanged owner wrote %d times: %v", len(writes), writes)
	}
	if got := f.status("app").WaitingFor; got.Name != first.Name || !got.Since.Equal(&first.Since) {
		t.Errorf("waitingFor moved from %s (since %s) to %s (since %s)", first.Name, first.Since, got.Name, got.Since)
	}
}

// TestLifecycle_ExpansionStallRecheckedOnStorageClassChange: an owner Stalled because its claim's
// StorageClass does not allow volume expansion is reconciled as soon as an administrator allows
// it (a StorageClass watch), not up to 5 minutes later.
func TestLifecycle_ExpansionStallRecheckedOnStorageClassChange(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "fixed-"}, Provisioner: "example.com/none"}
	if err := env.Client.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	f := newRegisteredFixture(t, claimGraph(class.Name))
	f.widget("db", testapi.WidgetSpec{Data: map[string]string{"size": "1Gi", "pod": "v1"}})
	poll.True(t, "the claim exists", waitTimeout, func(context.Context) bool { return !f.notFound(&corev1.PersistentVolumeClaim{}, "db-data") })
	bound := f.get(&corev1.PersistentVolumeClaim{}, "db-data").(*corev1.PersistentVolumeClaim)
	bound.Status.Phase = corev1.ClaimBound
	if err := f.cl.Status().Update(context.Background(), bound); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "Ready", waitTimeout, func(context.Context) bool { return isTrue(f.status("db"), kdagv1alpha1.ConditionReady) })

	f.updateWidget("db", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"size": "2Gi", "pod": "v1"} })
	poll.True(t, "Stalled VolumeExpansionForbidden", waitTimeout, func(context.Context) bool {
		c := condition(f.status("db"), kdagv1alpha1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == kdagv1alpha1.ReasonVolumeExpansionForbidden
	})
	live := &storagev1.StorageClass{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(class), live); err != nil {
		t.Fatal(err)
	}
	live.AllowVolumeExpansion = ptr.To(true)
	if err := env.Client.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the claim grows once its StorageClass allows it", waitTimeout, func(context.Context) bool {
		c := f.get(&corev1.PersistentVolumeClaim{}, "db-data").(*corev1.PersistentVolumeClaim)
		return c.Spec.Resources.Requests.Storage().Cmp(resource.MustParse("2Gi")) == 0
	})
}
