package resources_test

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestCustomResourceReady(t *testing.T) {
	ready := metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue}
	notReady := metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	waiting := metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Message: "waiting for Secret ns/db"}
	stalled := metav1.Condition{Type: kdagv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Invalid", Message: "use a shorter name"}
	tests := []struct {
		name       string
		generation int64
		status     kdagv1alpha1.Status
		want       bool
		// wantWaiting is the resources.NotReadyError reason; wantTerminal says the error is terminal.
		wantWaiting  string
		wantTerminal string
	}{
		{name: "no status yet", generation: 1, want: false},
		{name: "ready and current", generation: 2, status: kdagv1alpha1.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{ready}}, want: true},
		{name: "ready but stale", generation: 3, status: kdagv1alpha1.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{ready}}, want: false},
		{name: "not ready", generation: 2, status: kdagv1alpha1.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{notReady}}, want: false},
		{name: "no Ready condition", generation: 2, status: kdagv1alpha1.Status{ObservedGeneration: 2}, want: false},
		{name: "not ready says why", generation: 2, status: kdagv1alpha1.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{waiting}},
			wantWaiting: "waiting for Secret ns/db"},
		{name: "stalled", generation: 2, status: kdagv1alpha1.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{notReady, stalled}},
			wantTerminal: "stalled (Invalid): use a shorter name"},
		{name: "stalled but stale", generation: 3, status: kdagv1alpha1.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{notReady, stalled}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Generation: tt.generation}}
			w.Status.Status = tt.status
			got, err := resources.CustomResourceReady(w)
			var nr *resources.NotReadyError
			switch {
			case tt.wantWaiting != "":
				if got || !errors.As(err, &nr) || nr.Reason != tt.wantWaiting {
					t.Fatalf("resources.CustomResourceReady() = %v, %v; want false, resources.NotReadyError %q", got, err, tt.wantWaiting)
				}
			case tt.wantTerminal != "":
				var se *resources.StalledError
				if got || !errors.As(err, &se) || !errors.Is(err, reconcile.TerminalError(nil)) || err.Error() != tt.wantTerminal {
					t.Fatalf("resources.CustomResourceReady() = %v, %v; want false and a terminal error %q", got, err, tt.wantTerminal)
				}
			case err != nil || got != tt.want:
				t.Fatalf("resources.CustomResourceReady() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
