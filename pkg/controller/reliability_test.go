package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestReconcile_StatusWriteFailureReportedInEvent: the status cannot report that writing it
// failed, so a Warning event does; the next reconcile writes it.
func TestReconcile_StatusWriteFailureReportedInEvent(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	f.calls.FailNext("PATCH", "/apis/testing.kdag.dev/v1alpha1/namespaces/"+f.ns+"/widgets/app/status", 1)

	err := f.reconcile("app")
	if err == nil || !strings.Contains(err.Error(), "write status") {
		t.Fatalf("reconcile: err = %v, want the failed status write", err)
	}
	ev := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonStatusWriteFailed)
	if !strings.Contains(ev.Note, "write status") || !strings.Contains(ev.Note, "injected fault") {
		t.Errorf("event note %q does not carry the status write's error", ev.Note)
	}
	f.settle("app")
	if st := f.status("app"); !isTrue(st, "Ready") {
		t.Errorf("conditions after the fault is gone %+v, want Ready=True", st.Conditions)
	}
}

// TestCreateOnly_OursButNotCachedIsNotRewritten: a create-only object that belongs to the owner
// (its owner reference says so) but is not in the cache (a lost response to its creation, a
// watch that is behind, or someone removed kdag's controller label) keeps its content: the
// generated password it holds is never replaced by a new one; only kdag's labels come back.
func TestCreateOnly_OursButNotCachedIsNotRewritten(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	w := f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
	// Without kdag's controller label the label-selected cache does not hold it, so the
	// reconcile finds it through the uncached read, as the first one after a lost response does.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: f.ns, Name: "app-secret", Labels: map[string]string{kdagv1alpha1.LabelOwnerUID: string(w.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: testapi.GroupVersion.String(), Kind: "Widget", Name: w.Name,
				UID: w.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Data: map[string][]byte{"password": []byte("generated-before")},
	}
	if err := f.cl.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	f.settle("app")
	got := f.get(&corev1.Secret{}, "app-secret").(*corev1.Secret)
	if string(got.Data["password"]) != "generated-before" || got.UID != secret.UID {
		t.Errorf("generated Secret rewritten: password replaced %v, UID %s (was %s)",
			string(got.Data["password"]) != "generated-before", got.UID, secret.UID)
	}
	if got.Labels[kdagv1alpha1.LabelController] != f.name || got.Labels[kdagv1alpha1.LabelOwnerUID] != string(w.UID) {
		t.Errorf("labels %v, want kdag's back", got.Labels)
	}
}
