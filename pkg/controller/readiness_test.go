package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// childRM makes each Widget the owner of one child Widget "<name>-child", gated on resources.CustomResourceReady,
// and of a ConfigMap that waits for the child.
type childRM struct{}

func (childRM) OwnedTypes() []client.Object {
	return []client.Object{&testapi.Widget{}, &corev1.ConfigMap{}}
}

func (childRM) AddResources(_ context.Context, owner *testapi.Widget, b *controller.Graph) error {
	w := owner
	if strings.HasSuffix(w.Name, "-child") {
		return nil
	}
	child := b.Add(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-child"}, Spec: testapi.WidgetSpec{MaxReplicas: 1}},
		controller.ReadyWhen(resources.CustomResourceReady))
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-after-child"}}, controller.DependsOn(child))
	return nil
}

// TestConditionReady_ParentExplainsChild: the owner of a child custom resource says why the child
// is not ready (its Ready message) while it waits, and is Stalled with the child's message when
// the child is Stalled.
func TestCustomResourceReady_ParentExplainsChild(t *testing.T) {
	f := newFixture(t, childRM{})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	childID := "Widget " + f.ns + "/app-child"
	setChild := func(conds ...metav1.Condition) {
		t.Helper()
		child := f.get(&testapi.Widget{}, "app-child").(*testapi.Widget)
		child.Status.Status = kdagv1alpha1.Status{ObservedGeneration: child.Generation, Conditions: conds}
		for i := range child.Status.Conditions {
			child.Status.Conditions[i].LastTransitionTime = metav1.Now()
			child.Status.Conditions[i].ObservedGeneration = child.Generation
		}
		if err := f.cl.Status().Update(context.Background(), child); err != nil {
			t.Fatal(err)
		}
		f.waitCachedVersion(&testapi.Widget{}, "app-child", child.ResourceVersion)
	}

	setChild(metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: kdagv1alpha1.ReasonWaiting, Message: "waiting for Secret ns/db"})
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile with the child waiting: %v", err)
	}
	want := "waiting for " + childID + " (waiting for Secret ns/db)"
	if c := condition(f.status("app"), kdagv1alpha1.ConditionReconciling); c == nil || c.Message != want {
		t.Errorf("Reconciling condition %+v, want message %q", c, want)
	}

	setChild(
		metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: kdagv1alpha1.ReasonInvalid, Message: "use a shorter name"},
		metav1.Condition{Type: kdagv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonInvalid, Message: "use a shorter name"},
	)
	if err := f.reconcile("app"); err == nil || !isTerminalErr(err) {
		t.Fatalf("reconcile with the child stalled: %v, want a terminal error", err)
	}
	st := f.status("app")
	stalled := condition(st, kdagv1alpha1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || !strings.Contains(stalled.Message, childID) ||
		!strings.Contains(stalled.Message, "stalled (Invalid): use a shorter name") || stalled.Reason != kdagv1alpha1.ReasonInvalid {
		t.Errorf("Stalled condition %+v, want True, reason %s, naming %s and the child's reason and message", stalled, kdagv1alpha1.ReasonInvalid, childID)
	}
	if !f.notFound(&corev1.ConfigMap{}, "app-after-child") {
		t.Error("the ConfigMap that depends on the stalled child was created")
	}
}
