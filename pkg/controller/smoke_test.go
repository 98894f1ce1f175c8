package controller_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestReconcile_CreatesGraphAndBecomesReady(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
	f.settle("app")

	d := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
	if d.Labels[kdagv1alpha1.LabelController] == "" || len(d.OwnerReferences) != 1 {
		t.Fatalf("deployment labels %v owner refs %v: want kdag labels and one owner reference", d.Labels, d.OwnerReferences)
	}
	if d.Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash] == "" {
		t.Fatalf("pod template has no %s annotation", kdagv1alpha1.AnnotationDependenciesHash)
	}
	w := f.get(&testapi.Widget{}, "app").(*testapi.Widget)
	if !meta.IsStatusConditionTrue(w.Status.Conditions, kdagv1alpha1.ConditionReady) {
		t.Fatalf("widget conditions %+v: want Ready=True", w.Status.Conditions)
	}
	_ = f.get(&corev1.Secret{}, "app-secret")

	f.calls.Reset()
	for range 3 {
		if err := f.reconcile("app"); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	writes, reads := f.calls.snapshot()
	if len(writes) != 0 || len(reads) != 0 {
		t.Fatalf("3 reconciles of an unchanged owner: %d writes %v, %d uncached reads %v; want 0 and 0", len(writes), writes, len(reads), reads)
	}
	_ = context.Background
}
