package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/api"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// referenceRM: each Widget needs the user's Secret "<name>-db" (a reference) for its ConfigMap.
var referenceRM = funcRM{add: func(w *testapi.Widget, b *Builder) error {
	db := b.Reference(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-db"}})
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"db": w.Name + "-db"}},
		DependsOn(db))
	return nil
}}

// TestReference_WaitsForMissingObjectThenProceeds: a referenced Secret that does not exist
// keeps its dependents waiting, the owner Reconciling with a message naming it, and the owner
// requeued after ReferenceRecheck; once the user creates it, the graph proceeds. kdag never
// writes, labels, prunes or deletes it, and reads it once.
func TestReference_WaitsForMissingObjectThenProceeds(t *testing.T) {
	f := newFixture(t, referenceRM, WithReferenceRecheck(7*time.Second), WithOrderedTeardown())
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "app"}}
	secretID := "Secret " + f.ns + "/app-db"

	f.calls.reset()
	res, err := f.c.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatalf("reconcile without the Secret: %v", err)
	}
	if res.RequeueAfter != 7*time.Second {
		t.Errorf("RequeueAfter %s, want ReferenceRecheck (7s): no watch covers the Secret", res.RequeueAfter)
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
	if c := condition(st, api.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue || c.Message != want {
		t.Errorf("Reconciling condition %+v, want True with %q", c, want)
	}
	if c := condition(st, api.ConditionStalled); c != nil {
		t.Errorf("Stalled condition %+v, want none: the Secret may be created later", c)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-db"}, StringData: map[string]string{"password": "s3cret"}}
	if err := f.cl.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	f.settle("app")
	if c := condition(f.status("app"), api.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready condition %+v after the Secret was created, want True", c)
	}
	f.get(&corev1.ConfigMap{}, "app-config")

	// Seen once: later reconciles do not read it again.
	f.calls.reset()
	if res, err := f.c.Reconcile(context.Background(), req); err != nil || res.RequeueAfter != 0 {
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
	plan, err := NewPlan(context.Background(), referenceRM, w, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Nodes) != 2 || !plan.Nodes[0].Reference || plan.Nodes[1].Reference {
		t.Fatalf("plan nodes %v, want the Secret as a reference, then the ConfigMap", plan.Nodes)
	}
	if got, want := plan.Nodes[0].String(), "Secret ns/app-db  (reference: must exist, never written)"; got != want {
		t.Errorf("reference node renders as %q, want %q", got, want)
	}
}
