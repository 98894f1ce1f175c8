package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestReconcile_StatusWriteFailureReportedInEvent: the status cannot report that writing it
// failed, so a Warning event does; the next reconcile writes it.
func TestReconcile_StatusWriteFailureReportedInEvent(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.calls.failNext("PATCH", "/apis/testing.kdag.dev/v1alpha1/namespaces/"+f.ns+"/widgets/app/status", 1)

	err := f.reconcile("app")
	if err == nil || !strings.Contains(err.Error(), "write status") {
		t.Fatalf("reconcile: err = %v, want the failed status write", err)
	}
	ev := f.waitEvent("app", corev1.EventTypeWarning, ReasonStatusWriteFailed)
	if !strings.Contains(ev.Note, "write status") || !strings.Contains(ev.Note, "injected fault") {
		t.Errorf("event note %q does not carry the status write's error", ev.Note)
	}
	f.settle("app")
	if st := f.status("app"); !isTrue(st, "Ready") {
		t.Errorf("conditions after the fault is gone %+v, want Ready=True", st.Conditions)
	}
}

// TestCreateOnly_OursButNotCachedIsNotRewritten: a create-only object that belongs to the owner
// but is not in the cache yet (a lost response to its creation, or a watch that is behind) keeps
// its content: the generated password it holds is never replaced by a new one.
func TestCreateOnly_OursButNotCachedIsNotRewritten(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	// Without kdag's controller label the label-selected cache never holds it, so every
	// reconcile finds it through the uncached read, as the first one after a lost response does.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-secret", Labels: map[string]string{LabelOwnerUID: string(w.UID)}},
		Data:       map[string][]byte{"password": []byte("generated-before")},
	}
	if err := f.cl.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	got := f.get(&corev1.Secret{}, "app-secret").(*corev1.Secret)
	if string(got.Data["password"]) != "generated-before" || got.ResourceVersion != secret.ResourceVersion {
		t.Errorf("generated Secret rewritten: password %q, resourceVersion %s (was %s)",
			got.Data["password"], got.ResourceVersion, secret.ResourceVersion)
	}
}
