package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controller/internal/referenced"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// referenceRM: each Widget needs the user's Secret "<name>-db" (a reference) for its ConfigMap.
var referenceRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	db := b.Reference(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-db"}})
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"db": w.Name + "-db"}},
		controller.DependsOn(db))
	return nil
}}

// TestReference_WaitsForMissingObjectThenProceeds: a referenced Secret that does not exist
// keeps its dependents waiting and the owner Reconciling with a message naming it; once the
// user creates it, the graph proceeds. kdag never writes, labels, prunes or deletes it, and
// reads its content once while it does not change.
func TestReference_WaitsForMissingObjectThenProceeds(t *testing.T) {
	f := newFixture(t, referenceRM, controller.Options{OrderedTeardown: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	secretID := "Secret " + f.ns + "/app-db"

	f.calls.Reset()
	if _, err := f.reconcileResult("app"); err != nil {
		t.Fatalf("reconcile without the Secret: %v", err)
	}
	for _, w := range f.objectWrites() {
		if strings.Contains(w, "/secrets") {
			t.Errorf("write to a Secret while only referencing it: %s", w)
		}
	}
	if !f.notFound(&corev1.ConfigMap{}, "app-config") {
		t.Error("the ConfigMap was created before the Secret it depends on exists")
	}
	want := "waiting for " + secretID + " (it does not exist yet: create it)"
	st := f.status("app")
	if c := condition(st, kdagv1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue || c.Message != want {
		t.Errorf("Reconciling condition %+v, want True with %q", c, want)
	}
	if c := condition(st, kdagv1alpha1.ConditionStalled); c != nil {
		t.Errorf("Stalled condition %+v, want none: the Secret may be created later", c)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-db"}, StringData: map[string]string{"password": "s3cret"}}
	if err := f.cl.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	f.waitReferenced(&corev1.Secret{}, "app-db", true)
	f.settle("app")
	if c := condition(f.status("app"), kdagv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready condition %+v after the Secret was created, want True", c)
	}
	f.get(&corev1.ConfigMap{}, "app-config")

	// Read once: later reconciles of the unchanged Secret do not read it again.
	f.calls.Reset()
	if res, err := f.reconcileResult("app"); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reconcile of the settled owner: %+v, %v; want no requeue, no error", res, err)
	}
	if _, reads := f.calls.snapshot(); len(reads) != 0 {
		t.Errorf("reconcile of the settled owner read %v, want no uncached read", reads)
	}

	f.deleteAndFinalize("app", nil)
	live := f.get(&corev1.Secret{}, "app-db").(*corev1.Secret)
	if len(live.Labels) != 0 || len(live.OwnerReferences) != 0 || string(live.Data["password"]) != "s3cret" {
		t.Errorf("referenced Secret after the owner's teardown: labels %v owners %v data changed %v; want it untouched",
			live.Labels, live.OwnerReferences, string(live.Data["password"]) != "s3cret")
	}
	for _, mf := range live.ManagedFields {
		if strings.HasPrefix(mf.Manager, "kdag") {
			t.Errorf("referenced Secret has a managed-fields entry of %s", mf.Manager)
		}
	}
}

func TestPlan_ReferenceNode(t *testing.T) {
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}
	p, err := plan.NewPlan(context.Background(), referenceRM, w, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 2 || !p.Nodes[0].Reference || p.Nodes[1].Reference {
		t.Fatalf("plan nodes %v, want the Secret as a reference, then the ConfigMap", p.Nodes)
	}
	if got, want := p.Nodes[0].String(), "Secret ns/app-db  (reference: must exist, never written)"; got != want {
		t.Errorf("reference node renders as %q, want %q", got, want)
	}
}

// waitReferenced waits until the reconciler's cache of referenced objects holds obj's kind named
// name (or, with exists false, no longer holds it).
func (f *fixture) waitReferenced(obj client.Object, name string, exists bool) {
	f.t.Helper()
	gvk, err := f.mgr().GetClient().GroupVersionKindFor(obj)
	if err != nil {
		f.t.Fatal(err)
	}
	poll.True(f.t, fmt.Sprintf("referenced %s %s present: %v", gvk.Kind, name, exists), waitTimeout, func(context.Context) bool {
		m, err := controller.CachedReference(context.Background(), f.reconciler(), gvk, f.ns, name)
		return err == nil && exists == (m != nil)
	})
}

// keysRM: the Widget's Deployment reads keys host, user and password of the user's Secret
// "<name>-db", which it references with RequireKeys.
var keysRM = funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
	db := b.Reference(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-db"}}, controller.RequireKeys("host", "user", "password"))
	b.Add(podDeployment(w.Name, corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: w.Name + "-db"}}}},
	}}}), controller.DependsOn(db), controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	return nil
}}

// setSecret creates or replaces the fixture namespace's Secret name with data, and waits until
// the cache of referenced objects holds that version.
func (f *fixture) setSecret(name string, data map[string]string) {
	f.t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
	if err := f.cl.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		s.StringData = data
		if err := f.cl.Create(ctx, s); err != nil {
			f.t.Fatal(err)
		}
	} else {
		s.Data, s.StringData = nil, data
		if err := f.cl.Update(ctx, s); err != nil {
			f.t.Fatal(err)
		}
	}
	poll.True(f.t, "the cache of referenced objects sees Secret "+name+" at "+s.ResourceVersion, waitTimeout, func(context.Context) bool {
		m, err := controller.CachedReference(ctx, f.reconciler(), corev1.SchemeGroupVersion.WithKind("Secret"), f.ns, name)
		return err == nil && m != nil && m.GetResourceVersion() == s.ResourceVersion
	})
}

// TestReference_RecheckedOnEveryReconcile (4): a reference is checked on every reconcile, not
// trusted once seen: a Secret that lacks a required key keeps its dependents waiting with a
// message naming the object and the keys, a deleted one is noticed, and neither costs an
// uncached read while the Secret does not change.
func TestReference_RecheckedOnEveryReconcile(t *testing.T) {
	f := newFixture(t, keysRM)
	secretID := "Secret " + f.ns + "/app-db"
	f.setSecret("app-db", map[string]string{"host": "db.example.com"})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	want := "waiting for " + secretID + " (it has no keys password, user: add them)"
	if c := condition(f.status("app"), kdagv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Message != want {
		t.Fatalf("Ready condition %+v, want False with %q", c, want)
	}
	if !f.notFound(&appsv1.Deployment{}, "app") {
		t.Error("the Deployment was created although its Secret lacks keys it reads")
	}
	// The next reconcile reads the owner from the cache: it is unchanged once the cache holds the
	// status the first one wrote (on a loaded machine the watch event can come after it).
	f.waitCachedVersion(&testapi.Widget{}, "app", f.get(&testapi.Widget{}, "app").GetResourceVersion())
	f.calls.Reset()
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if writes, reads := f.calls.snapshot(); len(writes)+len(reads) != 0 {
		t.Errorf("reconcile of an unchanged owner and Secret: writes %v, uncached reads %v; want none", writes, reads)
	}

	f.setSecret("app-db", map[string]string{"host": "db.example.com", "user": "gitea", "password": "s3cret"})
	f.settle("app")
	if !isTrue(f.status("app"), kdagv1alpha1.ConditionReady) {
		t.Fatalf("conditions %+v once the Secret has every key, want Ready=True", f.status("app").Conditions)
	}

	if err := f.cl.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-db"}}); err != nil {
		t.Fatal(err)
	}
	f.waitReferenced(&corev1.Secret{}, "app-db", false)
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	want = "waiting for " + secretID + " (it does not exist yet: create it)"
	if c := condition(f.status("app"), kdagv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Message != want {
		t.Errorf("Ready condition %+v after the Secret was deleted, want False with %q", c, want)
	}
}

// TestReference_ChangeWakesItsOwners (4): with the reconciler registered, creating the
// referenced Secret reconciles the waiting owner by itself (no polling, no requeue timer).
func TestReference_ChangeWakesItsOwners(t *testing.T) {
	f := newRegisteredFixture(t, keysRM)
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	poll.True(t, "the owner waits for its Secret", waitTimeout, func(context.Context) bool {
		c := condition(f.status("app"), kdagv1alpha1.ConditionReady)
		return c != nil && strings.Contains(c.Message, "does not exist yet")
	})
	f.setSecret("app-db", map[string]string{"host": "h", "user": "u"})
	poll.True(t, "the owner names the missing key", waitTimeout, func(context.Context) bool {
		c := condition(f.status("app"), kdagv1alpha1.ConditionReady)
		return c != nil && strings.Contains(c.Message, "it has no key password: add it")
	})
	f.setSecret("app-db", map[string]string{"host": "h", "user": "u", "password": "p"})
	poll.True(t, "the owner is Ready", waitTimeout, func(context.Context) bool { return isTrue(f.status("app"), kdagv1alpha1.ConditionReady) })
}

// TestReference_RotationRollsDependents (9): a referenced Secret's required keys feed its
// dependents' dependencies hash, so rotating the password changes the Deployment's pod
// template (its pods roll); a key the dependents do not read changes nothing.
func TestReference_RotationRollsDependents(t *testing.T) {
	f := newFixture(t, keysRM)
	f.setSecret("app-db", map[string]string{"host": "h", "user": "u", "password": "old"})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("app")
	podHash := func() string {
		d := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
		return d.Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash]
	}
	before := podHash()
	if before == "" {
		t.Fatal("the Deployment's pod template has no dependencies hash")
	}

	f.setSecret("app-db", map[string]string{"host": "h", "user": "u", "password": "old", "comment": "not read"})
	if writes := f.settle("app"); len(writes) != 0 {
		t.Errorf("a key no dependent reads changed: writes %v, want none", writes)
	}
	if got := podHash(); got != before {
		t.Errorf("pod template hash %s → %s for a key no dependent reads", before, got)
	}

	f.setSecret("app-db", map[string]string{"host": "h", "user": "u", "password": "rotated", "comment": "not read"})
	f.settle("app")
	if got := podHash(); got == before {
		t.Error("the password was rotated and the pod template's dependencies hash did not change: the pods do not roll")
	}
}

// TestBuilder_ReferenceOptions: a Reference takes RequireKeys only, RequireKeys applies to a
// Secret or ConfigMap Reference only, and referencing one object twice (a Secret that holds both
// the database and the administrator credentials) is one node requiring both sets of keys.
func TestBuilder_ReferenceOptions(t *testing.T) {
	secret := func() *corev1.Secret { return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "all-in-one"}} }
	for _, tc := range []struct {
		name    string
		add     func(b *controller.Graph)
		wantErr string
		want    string // the plan's first node
	}{
		{"shared Secret", func(b *controller.Graph) {
			b.Reference(secret(), controller.RequireKeys("host", "password"))
			b.Reference(secret(), controller.RequireKeys("username", "password"))
		}, "", "Secret ns/all-in-one  (reference: must exist, never written; keys host, password, username)"},
		{"RequireKeys on an owned object", func(b *controller.Graph) { b.Add(secret(), controller.RequireKeys("k")) }, "RequireKeys applies to a Reference only", ""},
		{"CreateOnly on a Reference", func(b *controller.Graph) { b.Reference(secret(), controller.CreateOnly()) }, "a Reference takes no option but RequireKeys", ""},
		{"RequireKeys on a Service", func(b *controller.Graph) {
			b.Reference(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, controller.RequireKeys("k"))
		}, "RequireKeys applies to a Secret or a ConfigMap only", ""},
		{"the same object referenced and owned", func(b *controller.Graph) {
			b.Reference(secret())
			b.Add(secret())
		}, "added twice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assertOneNodePlan(t, tc.add, tc.wantErr, tc.want) })
	}
}

// assertOneNodePlan plans the Widget ns/app whose AddResources is add, and checks that the plan
// fails with an error saying wantErr or, with wantErr "", that it holds one node printed as want.
func assertOneNodePlan(t *testing.T, add func(b *controller.Graph), wantErr, want string) {
	t.Helper()
	rm := funcRM{add: func(_ *testapi.Widget, b *controller.Graph) error { add(b); return nil }}
	p, err := plan.NewPlan(context.Background(), rm, &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}, scheme, nil)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("NewPlan error %v, want one saying %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 1 || p.Nodes[0].String() != want {
		t.Errorf("plan nodes %v, want one: %q", p.Nodes, want)
	}
}

// TestReference_NoStatusFromAStoppingManager: a manager that is shutting down stops the
// informers of referenced objects (a runnable without leader election) before its controllers'
// last reconciles end. A reconcile that meets them stopped fails for that reason, not the
// owner's: it must not write a NotReady status, which the next process would have to turn back
// (a crash-test run caught a stopping manager writing one; issue 32's CI). The reconcile reports
// referenced.ErrStopped and writes nothing.
func TestReference_NoStatusFromAStoppingManager(t *testing.T) {
	f := newFixture(t, referenceRM)
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	if err := f.StopManager(); err != nil {
		t.Fatalf("stop the manager: %v", err)
	}
	f.calls.Reset()
	if err := f.reconcile("app"); !errors.Is(err, referenced.ErrStopped) {
		t.Errorf("reconcile while the manager stops: err = %v, want referenced.ErrStopped", err)
	}
	if w := f.Writes(); len(w) > 0 {
		t.Errorf("a stopping manager wrote %v, want nothing", w)
	}
	if c := condition(f.status("app"), kdagv1alpha1.ConditionReady); c != nil {
		t.Errorf("Ready condition %+v written by a stopping manager, want none", c)
	}
}
