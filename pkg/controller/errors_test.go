package controller_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// validatingRM is widgetRM with a Validator that refuses maxReplicas 0.
type validatingRM struct{ widgetRM }

func (validatingRM) Validate(_ context.Context, owner *testapi.Widget) error {
	if owner.Spec.MaxReplicas < 1 {
		return reconcile.TerminalError(errors.New("spec.maxReplicas must be at least 1"))
	}
	return nil
}

func TestValidate_InvalidOwnerIsStalledUntilFixed(t *testing.T) {
	f := newFixture(t, validatingRM{widgetRM{readyDeployment: true}})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 0})

	err := f.reconcile("app")
	if !isTerminalErr(err) {
		t.Fatalf("reconcile: err = %v, want a terminal error", err)
	}
	const want = "spec.maxReplicas must be at least 1"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("reconcile error %q does not carry the validation message", err)
	}
	st := f.status("app")
	stalled, ready := condition(st, kdagv1alpha1.ConditionStalled), condition(st, kdagv1alpha1.ConditionReady)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != kdagv1alpha1.ReasonInvalid || !strings.Contains(stalled.Message, want) {
		t.Errorf("Stalled condition %+v, want True, reason %s, message with %q", stalled, kdagv1alpha1.ReasonInvalid, want)
	}
	if ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("Ready condition %+v, want False", ready)
	}
	if rec := condition(st, kdagv1alpha1.ConditionReconciling); rec != nil {
		t.Errorf("Reconciling condition %+v, want none while stalled", rec)
	}
	if !f.notFound(&corev1.ConfigMap{}, "app-config") {
		t.Errorf("ConfigMap created for an invalid owner")
	}
	ev := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonInvalid)
	if !strings.Contains(ev.Note, want) {
		t.Errorf("Warning event note %q does not carry the validation message", ev.Note)
	}

	// Fixing the spec clears Stalled.
	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.MaxReplicas = 2 })
	f.settle("app")
	st = f.status("app")
	if condition(st, kdagv1alpha1.ConditionStalled) != nil || !isTrue(st, kdagv1alpha1.ConditionReady) {
		t.Errorf("conditions after fixing the spec %+v, want Ready=True and no Stalled", st.Conditions)
	}
}

func TestApply_ObjectRejectedAsInvalidIsTerminal(t *testing.T) {
	tests := []struct {
		name   string
		add    func(w *testapi.Widget, b *controller.Graph)
		failed string // name of the rejected node's object
	}{
		{
			name: "ConfigMap with an invalid data key",
			add: func(w *testapi.Widget, b *controller.Graph) {
				b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Data: map[string]string{"bad key!": "x"}})
			},
			failed: "bad",
		},
		{
			name: "Service with port 0",
			add: func(w *testapi.Widget, b *controller.Graph) {
				b.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 0}}}})
			},
			failed: "bad",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
				b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "good"}})
				tt.add(w, b)
				return nil
			}})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})

			err := f.reconcile("app")
			if !isTerminalErr(err) {
				t.Fatalf("reconcile: err = %v, want a terminal error", err)
			}
			st := f.status("app")
			stalled := condition(st, kdagv1alpha1.ConditionStalled)
			if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != kdagv1alpha1.ReasonObjectInvalid {
				t.Fatalf("Stalled condition %+v, want True with reason %s", stalled, kdagv1alpha1.ReasonObjectInvalid)
			}
			if !strings.Contains(stalled.Message, f.ns+"/"+tt.failed) {
				t.Errorf("Stalled message %q does not name the rejected object", stalled.Message)
			}
			if !strings.Contains(stalled.Message, "change the owner's spec") {
				t.Errorf("Stalled message %q does not say what to do", stalled.Message)
			}
			if isTrue(st, kdagv1alpha1.ConditionReady) {
				t.Errorf("Ready=True with a rejected node")
			}
			f.get(&corev1.ConfigMap{}, "good") // the valid node is applied regardless
			f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonObjectInvalid)
		})
	}
}

func TestReconcile_TransientFailureRetriedUntilReady(t *testing.T) {
	tests := []struct {
		name string
		rm   func(failures *atomic.Int32) controller.ResourceManager[*testapi.Widget]
		// inject arranges for the failed node to fail in the next reconcile only.
		inject func(f *fixture, failures *atomic.Int32)
		// failed is the failed node's object, "Kind name"; default the ConfigMap app-config.
		failed string
	}{
		{
			name: "API server answers 500 to the apply",
			rm: func(*atomic.Int32) controller.ResourceManager[*testapi.Widget] {
				return widgetRM{readyDeployment: true}
			},
			inject: func(f *fixture, _ *atomic.Int32) {
				f.calls.FailNext("PATCH", "/api/v1/namespaces/"+f.ns+"/configmaps/app-config", 1)
			},
		},
		{
			// kube-apiserver v1.36+ while etcd is unavailable (seen in test/e2e/controlplane):
			// 422 Invalid, but the server's failure, not the Service's.
			name: "API server cannot allocate the Service's cluster IP",
			rm: func(*atomic.Int32) controller.ResourceManager[*testapi.Widget] {
				return widgetRM{readyDeployment: true}
			},
			inject: func(f *fixture, _ *atomic.Int32) {
				st := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "app", field.ErrorList{field.Invalid(
					field.NewPath("spec", "clusterIPs"), []string{""},
					"failed to allocate IP: rpc error: code = Unavailable desc = error reading from server: EOF")}).ErrStatus
				f.calls.FailNextWithStatus("PATCH", "/api/v1/namespaces/"+f.ns+"/services/app", 1, st)
			},
			failed: "Service app",
		},
		{
			name: "a readiness check fails once",
			rm: func(failures *atomic.Int32) controller.ResourceManager[*testapi.Widget] {
				return widgetRM{readyDeployment: true, configOpts: []controller.NodeOption{controller.ReadyWhen(
					func(client.Object) (bool, error) {
						if failures.Add(-1) >= 0 {
							return false, errors.New("vault unreachable")
						}
						return true, nil
					})}}
			},
			inject: func(_ *fixture, failures *atomic.Int32) { failures.Store(1) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failures atomic.Int32
			f := newFixture(t, tt.rm(&failures))
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"k": "v"}})
			tt.inject(f, &failures)

			err := f.reconcile("app")
			if err == nil || isTerminalErr(err) {
				t.Fatalf("reconcile: err = %v, want a transient (non-terminal) error", err)
			}
			failed := "ConfigMap app-config"
			if tt.failed != "" {
				failed = tt.failed
			}
			kind, name, _ := strings.Cut(failed, " ")
			if !strings.Contains(err.Error(), kind+" "+f.ns+"/"+name) {
				t.Errorf("reconcile error %q does not name the failed node", err)
			}
			st := f.status("app")
			rec := condition(st, kdagv1alpha1.ConditionReconciling)
			if rec == nil || rec.Status != metav1.ConditionTrue || rec.Reason != kdagv1alpha1.ReasonNodeFailed {
				t.Errorf("Reconciling condition %+v, want True with reason %s", rec, kdagv1alpha1.ReasonNodeFailed)
			}
			if condition(st, kdagv1alpha1.ConditionStalled) != nil || isTrue(st, kdagv1alpha1.ConditionReady) {
				t.Errorf("conditions %+v, want neither Stalled nor Ready=True", st.Conditions)
			}

			f.settle("app")
			st = f.status("app")
			if !isTrue(st, kdagv1alpha1.ConditionReady) || condition(st, kdagv1alpha1.ConditionReconciling) != nil {
				t.Errorf("conditions after the fault is gone %+v, want Ready=True and no Reconciling", st.Conditions)
			}
		})
	}
}

func TestBuild_MistakesAreTerminal(t *testing.T) {
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	tests := []struct {
		name string
		add  func(b *controller.Graph)
		want string // in the Stalled message
	}{
		{
			name: "same object twice",
			add:  func(b *controller.Graph) { b.Add(cm("twice")); b.Add(cm("twice")) },
			want: "twice: added twice",
		},
		{
			name: "object without a name",
			add:  func(b *controller.Graph) { b.Add(cm("")) },
			want: "object has no name",
		},
		{
			name: "nil object",
			add:  func(b *controller.Graph) { b.Add(nil) },
			want: "nil object",
		},
		{
			name: "typed nil object",
			add:  func(b *controller.Graph) { b.Add((*corev1.ConfigMap)(nil)) },
			want: "nil object",
		},
		{
			name: "blocker whose Add failed",
			add:  func(b *controller.Graph) { bad := b.Add(cm("")); b.Add(cm("after"), controller.DependsOn(bad)) },
			want: "is unknown",
		},
		{
			name: "type not owned",
			add: func(b *controller.Graph) {
				b.Add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}})
			},
			want: "not an owned type",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, funcRM{add: func(_ *testapi.Widget, b *controller.Graph) error {
				b.Add(cm("fine"))
				tt.add(b)
				return nil
			}})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})

			err := f.reconcile("app")
			if !isTerminalErr(err) {
				t.Fatalf("reconcile: err = %v, want a terminal error", err)
			}
			stalled := condition(f.status("app"), kdagv1alpha1.ConditionStalled)
			if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != kdagv1alpha1.ReasonBuildFailed {
				t.Fatalf("Stalled condition %+v, want True with reason %s", stalled, kdagv1alpha1.ReasonBuildFailed)
			}
			if !strings.Contains(stalled.Message, tt.want) {
				t.Errorf("Stalled message %q does not contain %q", stalled.Message, tt.want)
			}
			if !f.notFound(&corev1.ConfigMap{}, "fine") {
				t.Errorf("a graph with mistakes was partly applied")
			}
		})
	}
}

func TestBuild_AddResourcesErrorKinds(t *testing.T) {
	tests := []struct {
		name         string
		err          error
		wantTerminal bool
	}{
		{name: "plain error is retried", err: errors.New("cache not ready"), wantTerminal: false},
		{name: "terminal error stalls", err: reconcile.TerminalError(errors.New("spec cannot work")), wantTerminal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, funcRM{add: func(*testapi.Widget, *controller.Graph) error { return tt.err }})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
			err := f.reconcile("app")
			if err == nil || isTerminalErr(err) != tt.wantTerminal {
				t.Fatalf("reconcile: err = %v, want terminal = %v", err, tt.wantTerminal)
			}
			st := f.status("app")
			stalled := condition(st, kdagv1alpha1.ConditionStalled)
			rec := condition(st, kdagv1alpha1.ConditionReconciling)
			if tt.wantTerminal && (stalled == nil || stalled.Status != metav1.ConditionTrue) {
				t.Errorf("Stalled condition %+v, want True", stalled)
			}
			if !tt.wantTerminal && (rec == nil || rec.Status != metav1.ConditionTrue || stalled != nil) {
				t.Errorf("conditions %+v, want Reconciling=True and no Stalled", st.Conditions)
			}
		})
	}
}
