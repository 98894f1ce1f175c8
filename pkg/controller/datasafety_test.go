package controller_test

// Tests of the framework rules issue 20 (data safety) needs: ownership is an owner reference
// (or kdag's field manager where none can be held), never a label alone; hashes do not depend on
// which path saw a dependency; order-only edges; finished nodes; generated keys that protect
// data; namespaces being deleted.

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestOwnership_LabelAloneIsNotOwnership: a user's copy of a generated Secret that kept kdag's
// labels but has no owner reference is never pruned or torn down; kdag's own Deployment whose
// owner-UID label someone removed is still kdag's (its owner reference says so) and gets the
// label back, instead of being refused as foreign.
func TestOwnership_LabelAloneIsNotOwnership(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true}, controller.Options{OrderedTeardown: true})
	w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("app")
	ctx := context.Background()

	generated := f.get(&corev1.Secret{}, "app-secret").(*corev1.Secret)
	backup := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-secret-backup", Labels: generated.Labels},
		Data:       generated.Data,
	}
	if err := f.cl.Create(ctx, backup, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatal(err)
	}
	f.waitCachedVersion(&corev1.Secret{}, "app-secret-backup", backup.ResourceVersion)

	f.update(&appsv1.Deployment{}, "app", func(o client.Object) {
		l := o.GetLabels()
		delete(l, kdagv1alpha1.LabelOwnerUID)
		o.SetLabels(l)
	}, client.FieldOwner("kubectl-label"))
	f.settle("app")
	if d := f.get(&appsv1.Deployment{}, "app"); d.GetLabels()[kdagv1alpha1.LabelOwnerUID] != string(w.UID) {
		t.Errorf("Deployment labels %v after the label was removed, want kdag's owner-UID label back", d.GetLabels())
	}
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready=True: the Deployment is kdag's", f.status("app").Conditions)
	}
	f.get(&corev1.Secret{}, "app-secret-backup") // not pruned

	f.deleteAndFinalize("app", nil)
	f.get(&corev1.Secret{}, "app-secret-backup") // not torn down
	if !f.notFound(&corev1.Secret{}, "app-secret") {
		t.Error("the generated Secret survived the ordered teardown")
	}
}

// TestHash_SameWhetherJustCreatedOrCached: a dependency created in the same reconcile as its
// dependent feeds the same hash as when it is read from the cache later, so the dependent is
// written once (a first deploy does not roll a StatefulSet twice).
func TestHash_SameWhetherJustCreatedOrCached(t *testing.T) {
	rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		svc := b.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: w.Name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": w.Name}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		b.Add(podDeployment(w.Name, corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}), controller.DependsOn(svc), controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
		return nil
	}}
	f := newFixture(t, rm)
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("app")
	for range 3 {
		if err := f.reconcile("app"); err != nil {
			t.Fatal(err)
		}
	}
	if d := f.get(&appsv1.Deployment{}, "app"); d.GetGeneration() != 1 {
		t.Errorf("Deployment generation %d after a first deploy and reconciles, want 1: its dependencies hash flipped", d.GetGeneration())
	}
}

// phasedRM: a migration Job (Finished while spec.data["migrated"] is "yes") that a Deployment
// waits for with an order-only edge, a generated create-only Secret that protects the data of
// the claim "<name>-data", and the claim, created after it.
var phasedRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	jobOpts := []controller.NodeOption{controller.CreateOnly()}
	if w.Spec.Data["migrated"] == "yes" {
		jobOpts = append(jobOpts, controller.Finished())
	}
	job := b.Add(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-migrate"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "m", Image: "busybox"}},
		}}},
	}, jobOpts...)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
	key := b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-key"}, StringData: map[string]string{"k": "generated"}},
		controller.CreateOnly(), controller.ProtectsData(claim))
	data := b.Add(claim.DeepCopy(), controller.After(key), controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	b.Add(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": w.Name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}, controller.After(job), controller.DependsOn(key, data), controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	return nil
}}

// TestFinished_NotRecreatedAndOrderOnlyEdgeRollsNothing: a Finished node whose object is gone is
// Ready without being created again, and the Deployment that waited for it with After keeps its
// pod template (the Job's content never fed its hash).
func TestFinished_NotRecreatedAndOrderOnlyEdgeRollsNothing(t *testing.T) {
	f := newFixture(t, phasedRM.owning(&batchv1.Job{}, &corev1.PersistentVolumeClaim{}))
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	_ = f.reconcile("app")
	if !f.notFound(&appsv1.Deployment{}, "app") {
		t.Fatal("the Deployment ran before the Job completed")
	}
	completeJob(f, "app-migrate")
	f.settle("app")
	before := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)

	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"migrated": "yes"} })
	f.settle("app")
	job := f.get(&batchv1.Job{}, "app-migrate")
	if err := f.cl.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the cache sees the Job gone", waitTimeout, func(context.Context) bool { return f.cached(&batchv1.Job{}, "app-migrate") != nil })
	f.settle("app")
	if !f.notFound(&batchv1.Job{}, "app-migrate") {
		t.Error("the finished Job was created again")
	}
	after := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
	if after.Generation != before.Generation {
		t.Errorf("Deployment generation %d → %d: the finished Job's removal rolled it", before.Generation, after.Generation)
	}
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready=True", f.status("app").Conditions)
	}
}

// completeJob marks the named Job succeeded, as the Job controller does (markReady).
func completeJob(f *fixture, name string) { f.markReady(&batchv1.Job{}, name) }

// TestProtectsData_KeyNeverRegeneratedOverData: a generated key that protects a claim's data is
// not generated again when it is deleted while the claim exists: the owner is Stalled with
// reason DataKeyMissing naming both, until the key is restored; with no data, a new key is made.
func TestProtectsData_KeyNeverRegeneratedOverData(t *testing.T) {
	f := newFixture(t, phasedRM.owning(&batchv1.Job{}, &corev1.PersistentVolumeClaim{}))
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	_ = f.reconcile("app")
	completeJob(f, "app-migrate")
	f.settle("app")
	key := f.get(&corev1.Secret{}, "app-key").(*corev1.Secret)
	f.waitReferenced(&corev1.PersistentVolumeClaim{}, "app-data", true)

	if err := f.cl.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the cache sees the key gone", waitTimeout, func(context.Context) bool { return f.cached(&corev1.Secret{}, "app-key") != nil })
	err := f.reconcile("app")
	if !isTerminalErr(err) {
		t.Fatalf("reconcile without the key: err = %v, want a terminal error", err)
	}
	if !f.notFound(&corev1.Secret{}, "app-key") {
		t.Fatal("a new key was generated over existing data")
	}
	stalled := condition(f.status("app"), kdagv1alpha1.ConditionStalled)
	if stalled == nil || stalled.Reason != kdagv1alpha1.ReasonDataKeyMissing ||
		!strings.Contains(stalled.Message, "Secret "+f.ns+"/app-key") || !strings.Contains(stalled.Message, "PersistentVolumeClaim "+f.ns+"/app-data") {
		t.Fatalf("Stalled condition %+v, want reason %s naming the key and the claim", stalled, kdagv1alpha1.ReasonDataKeyMissing)
	}

	// Restored from a backup (without kdag's labels, as a backup tool may store it), annotated
	// for adoption: adopted with its data.
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-key",
		Annotations: map[string]string{kdagv1alpha1.AnnotationAdopt: "Widget/app"}}, Data: key.Data}
	if err := f.cl.Create(context.Background(), restored); err != nil {
		t.Fatal(err)
	}
	f.settle("app")
	if got := f.get(&corev1.Secret{}, "app-key").(*corev1.Secret); string(got.Data["k"]) != "generated" || got.UID != restored.UID {
		t.Error("the restored key was replaced")
	}
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v after the key was restored, want Ready=True", f.status("app").Conditions)
	}

	// No data: a new key is fine.
	for _, o := range []client.Object{&corev1.Secret{}, &corev1.PersistentVolumeClaim{}} {
		name := "app-key"
		if _, ok := o.(*corev1.PersistentVolumeClaim); ok {
			name = "app-data"
		}
		if err := f.cl.Delete(context.Background(), f.get(o, name), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
	// envtest has no controller to remove a claim's protection finalizer.
	pvc := f.get(&corev1.PersistentVolumeClaim{}, "app-data")
	pvc.SetFinalizers(nil)
	if err := f.cl.Update(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	f.waitReferenced(&corev1.PersistentVolumeClaim{}, "app-data", false)
	f.settle("app")
	f.get(&corev1.Secret{}, "app-key")
}

// TestNamespaceTerminating_NoRecreationAttempts: in a namespace being deleted (envtest runs no
// namespace controller, so it stays Terminating), an owner whose object is gone makes no attempt
// to create it, writes no status and reports no error: the owner goes with its namespace. Its
// finalizer, held for an object in another namespace, is released once kdag deleted that one.
func TestNamespaceTerminating_NoRecreationAttempts(t *testing.T) {
	other := env.Namespace(t)
	rm := funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}})
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: w.Name + "-remote"}})
		return nil
	}}
	f := startFixture(t, fixtureConfig{namespaces: []string{other}}, rm)
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("app")
	ctx := context.Background()
	if err := f.cl.Delete(ctx, f.get(&corev1.ConfigMap{}, "app-config")); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	if err := f.cl.Get(ctx, client.ObjectKey{Name: f.ns}, ns); err != nil {
		t.Fatal(err)
	}
	if err := f.cl.Delete(ctx, ns, &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the cache sees the ConfigMap gone", waitTimeout, func(context.Context) bool { return f.cached(&corev1.ConfigMap{}, "app-config") != nil })
	poll.True(t, "kdag sees the namespace being deleted", waitTimeout, func(context.Context) bool { return controller.NamespaceTerminating(ctx, f.reconciler(), f.ns) })
	f.calls.Reset()
	// Reconciles, as the owner's events would cause, until the finalizer is released: the first
	// deletes the remote ConfigMap, a later one (once the cache has seen it go) releases the
	// finalizer. Each must return no error.
	released := func() bool {
		return !controllerutil.ContainsFinalizer(f.get(&testapi.Widget{}, "app"), kdagv1alpha1.Finalizer)
	}
	poll.True(t, "the owner's finalizer released (held, the namespace cannot go)", waitTimeout, func(context.Context) bool {
		if _, err := f.Reconcile(ctx, controllertest.Named[testapi.Widget]("app")); err != nil {
			t.Fatalf("reconcile in a terminating namespace: %v, want no error", err)
		}
		return released()
	})
	for _, w := range f.objectWrites() {
		if strings.Contains(w, "/namespaces/"+f.ns+"/") && !strings.Contains(w, "/widgets/app") {
			t.Errorf("%s: a write in a namespace being deleted", w)
		}
		if strings.Contains(w, "/widgets/app/status") {
			t.Errorf("%s: a status write for an owner going away", w)
		}
	}
	if err := f.cl.Get(ctx, client.ObjectKey{Namespace: other, Name: "app-remote"}, &corev1.ConfigMap{}); err == nil {
		t.Error("the owner's ConfigMap in another namespace survived it")
	}
}
