package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// plainChildRM makes each Widget the owner of one child Widget "<name>-child" with no readiness
// rule of its own (unless nodeRule is set) and of a ConfigMap that depends on the child.
type plainChildRM struct{ nodeRule resources.ReadyFunc }

func (plainChildRM) OwnedTypes() []client.Object {
	return []client.Object{&testapi.Widget{}, &corev1.ConfigMap{}}
}

func (rm plainChildRM) AddResources(_ context.Context, owner *testapi.Widget, b *controller.Graph) error {
	if strings.HasSuffix(owner.Name, "-child") {
		return nil
	}
	var opts []controller.NodeOption
	if rm.nodeRule != nil {
		opts = append(opts, controller.ReadyWhen(rm.nodeRule))
	}
	child := b.Add(&testapi.Widget{ObjectMeta: metav1.ObjectMeta{Name: owner.Name + "-child"}, Spec: testapi.WidgetSpec{MaxReplicas: 1}}, opts...)
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner.Name + "-after-child"}}, controller.DependsOn(child))
	return nil
}

// TestReadiness_CustomResourceWithoutStatusIsNotReady (issue 15 item 2): a child custom
// resource whose controller has not written status for the generation kdag applied keeps its
// dependents waiting, though kstatus calls it Current; its status for that generation opens the
// gate. Only this test's reconciles run: nothing else writes the child's status.
func TestReadiness_CustomResourceWithoutStatusIsNotReady(t *testing.T) {
	f := newFixture(t, plainChildRM{})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	child := f.get(&testapi.Widget{}, "app-child").(*testapi.Widget)
	f.waitCachedVersion(&testapi.Widget{}, "app-child", child.ResourceVersion)
	if r := f.kstatusOf("app-child"); r.Status != status.CurrentStatus {
		t.Fatalf("kstatus calls the child without status %q; the test needs Current (the case kdag must not trust)", r.Status)
	}
	setStatus := func(observed int64, conds ...metav1.Condition) {
		t.Helper()
		child := f.get(&testapi.Widget{}, "app-child").(*testapi.Widget)
		child.Status.Status = kdagv1alpha1.Status{ObservedGeneration: observed, Conditions: conds}
		for i := range child.Status.Conditions {
			child.Status.Conditions[i].LastTransitionTime = metav1.Now()
			child.Status.Conditions[i].ObservedGeneration = observed
		}
		if err := f.cl.Status().Update(context.Background(), child); err != nil {
			t.Fatal(err)
		}
		f.waitCachedVersion(&testapi.Widget{}, "app-child", child.ResourceVersion)
	}
	ready := metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonReady}
	waitingFor := "waiting for Widget " + f.ns + "/app-child (no status from its controller for generation 1 yet)"

	steps := []struct {
		name      string
		set       func()
		wantReady bool
	}{
		{name: "no status yet", set: func() {}},
		{name: "status for the applied generation", set: func() { setStatus(1, ready) }, wantReady: true},
	}
	for _, step := range steps {
		step.set()
		if err := f.reconcile("app"); err != nil {
			t.Fatalf("%s: reconcile: %v", step.name, err)
		}
		created := !f.notFound(&corev1.ConfigMap{}, "app-after-child")
		if created != step.wantReady {
			t.Fatalf("%s: the dependent ConfigMap exists: %v, want %v", step.name, created, step.wantReady)
		}
		c := condition(f.status("app"), kdagv1alpha1.ConditionReconciling)
		if !step.wantReady && step.name == "no status yet" && (c == nil || c.Message != waitingFor) {
			t.Errorf("%s: Reconciling condition %+v, want message %q", step.name, c, waitingFor)
		}
	}
}

// TestReadiness_RegisteredOncePerKind (issue 15 item 2): WithReadyWhen applies to every node of
// the kind without a ReadyWhen of its own; a node's own ReadyWhen wins over it.
func TestReadiness_RegisteredOncePerKind(t *testing.T) {
	held := func(client.Object) (bool, error) {
		return false, &resources.NotReadyError{Reason: "held by the kind's rule"}
	}
	open := func(client.Object) (bool, error) { return true, nil }
	tests := []struct {
		name        string
		nodeRule    resources.ReadyFunc
		kindRule    resources.ReadyFunc
		wantCreated bool
		wantMessage string // of Reconciling, when not created
	}{
		{name: "kind rule holds every node of the kind", kindRule: held,
			wantMessage: "waiting for Widget %s/app-child (held by the kind's rule)"},
		{name: "kind rule opens a child without status", kindRule: open, wantCreated: true},
		{name: "node rule wins over the kind rule", kindRule: held, nodeRule: open, wantCreated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, plainChildRM{nodeRule: tt.nodeRule}, controller.Options{ReadyWhen: []controller.KindReadiness{{Kind: &testapi.Widget{}, Ready: tt.kindRule}}})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("first reconcile: %v", err)
			}
			child := f.get(&testapi.Widget{}, "app-child")
			f.waitCachedVersion(&testapi.Widget{}, "app-child", child.GetResourceVersion())
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("second reconcile: %v", err)
			}
			if created := !f.notFound(&corev1.ConfigMap{}, "app-after-child"); created != tt.wantCreated {
				t.Fatalf("the dependent ConfigMap exists: %v, want %v", created, tt.wantCreated)
			}
			if !tt.wantCreated {
				want := strings.ReplaceAll(tt.wantMessage, "%s", f.ns)
				if c := condition(f.status("app"), kdagv1alpha1.ConditionReconciling); c == nil || c.Message != want {
					t.Errorf("Reconciling condition %+v, want message %q", c, want)
				}
			}
		})
	}
}

func TestOptionsReadyWhen_RefusesUnknownKindsAndNil(t *testing.T) {
	f := newFixture(t, plainChildRM{})
	for name, opt := range map[string]controller.Options{
		"kind not in the scheme": {ReadyWhen: []controller.KindReadiness{{Kind: &unstructured.Unstructured{}, Ready: func(client.Object) (bool, error) { return true, nil }}}},
		"nil rule":               {ReadyWhen: []controller.KindReadiness{{Kind: &testapi.Widget{}, Ready: nil}}},
	} {
		if _, err := controller.Register(f.mgr(), "readiness-"+f.ns, plainChildRM{}, opt); err == nil ||
			!strings.Contains(err.Error(), "Options.ReadyWhen") {
			t.Errorf("%s: New error %v, want one naming Options.ReadyWhen", name, err)
		}
	}
}
