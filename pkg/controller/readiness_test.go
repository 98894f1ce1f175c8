package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/pkg/api"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestConditionReady(t *testing.T) {
	ready := metav1.Condition{Type: api.ConditionReady, Status: metav1.ConditionTrue}
	notReady := metav1.Condition{Type: api.ConditionReady, Status: metav1.ConditionFalse}
	tests := []struct {
		name       string
		generation int64
		status     api.Status
		want       bool
	}{
		{name: "no status yet", generation: 1, want: false},
		{name: "ready and current", generation: 2, status: api.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{ready}}, want: true},
		{name: "ready but stale", generation: 3, status: api.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{ready}}, want: false},
		{name: "not ready", generation: 2, status: api.Status{ObservedGeneration: 2, Conditions: []metav1.Condition{notReady}}, want: false},
		{name: "no Ready condition", generation: 2, status: api.Status{ObservedGeneration: 2}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Generation: tt.generation}}
			w.Status.Status = tt.status
			got, err := ConditionReady(w)
			if err != nil || got != tt.want {
				t.Fatalf("ConditionReady() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
