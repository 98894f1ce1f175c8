package controller_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestController_ForgetsObjectsDeletedByOthers: the verified state kdag keeps of an object it
// applied is dropped once the object is deleted by someone else (here the test; in a cluster,
// the garbage collector after the owner), so the process does not remember deleted objects.
func TestController_ForgetsObjectsDeletedByOthers(t *testing.T) {
	f := newFixture(t, layeredRM(3))
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.settle("app")
	cm := f.get(&corev1.ConfigMap{}, "app-0")
	if !controller.Engine(f.reconciler()).Verified(cm) {
		t.Fatal("no verified state remembered for ConfigMap app-0 after kdag applied it")
	}
	other := f.get(&corev1.ConfigMap{}, "app-1")
	if err := f.cl.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the verified state of the deleted ConfigMap is forgotten", waitTimeout, func(context.Context) bool {
		return !controller.Engine(f.reconciler()).Verified(cm)
	})
	if !controller.Engine(f.reconciler()).Verified(other) {
		t.Error("the verified state of ConfigMap app-1, not deleted, was forgotten too")
	}
}
