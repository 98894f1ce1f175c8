package controller_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// preCreateConfig creates "<owner>-config" as someone else would, without kdag's labels.
func (f *fixture) preCreateConfig(owner string, data map[string]string) {
	f.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: owner + "-config"}, Data: data}
	if err := f.cl.Create(context.Background(), cm); err != nil {
		f.t.Fatalf("create configmap: %v", err)
	}
}

// refusedConfig sets up an owner whose ConfigMap "app-config" exists without kdag's labels, and
// runs one reconcile, whose error it returns.
func refusedConfig(t *testing.T, foreignData map[string]string) (*fixture, error) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.preCreateConfig("app", foreignData)
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "ours"}})
	return f, f.reconcile("app")
}

func TestAdoption_ForeignObjectRefusedAndFailureIsolated(t *testing.T) {
	foreignData := map[string]string{"k": "theirs"}
	f, err := refusedConfig(t, foreignData)
	if err == nil {
		t.Fatal("reconcile: no error, want the adoption conflict")
	}
	if isTerminalErr(err) {
		t.Errorf("reconcile error %v is terminal, want transient (retried)", err)
	}
	cmID := "ConfigMap " + f.ns + "/app-config"
	if !strings.Contains(err.Error(), cmID) {
		t.Errorf("reconcile error %q does not name %s", err, cmID)
	}

	cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap)
	if !maps.Equal(cm.Data, foreignData) || cm.Labels[kdagv1alpha1.LabelOwnerUID] != "" {
		t.Errorf("foreign ConfigMap was changed: data %v labels %v", cm.Data, cm.Labels)
	}
	if !f.notFound(&appsv1.Deployment{}, "app") {
		t.Errorf("Deployment was created although its blocker %s failed", cmID)
	}
	f.get(&corev1.Service{}, "app")       // independent branch finished
	f.get(&corev1.Secret{}, "app-secret") // independent branch finished

	st := f.status("app")
	ready := condition(st, kdagv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse {
		t.Fatalf("Ready condition %+v, want False", ready)
	}
	if !strings.Contains(ready.Message, cmID) || !strings.Contains(ready.Message, kdagv1alpha1.AnnotationAdopt+"=Widget/app") {
		t.Errorf("Ready message %q, want it to name %s and the adoption annotation", ready.Message, cmID)
	}
	if rec := condition(st, kdagv1alpha1.ConditionReconciling); rec == nil || rec.Status != metav1.ConditionTrue {
		t.Errorf("Reconciling condition %+v, want True (the conflict is retried)", rec)
	}
	if stalled := condition(st, kdagv1alpha1.ConditionStalled); stalled != nil {
		t.Errorf("Stalled condition %+v, want none for a retried conflict", stalled)
	}
	f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonNodeFailed)

	// Retrying changes nothing while the object is there.
	f.settle("app")
	if cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap); !maps.Equal(cm.Data, foreignData) {
		t.Errorf("foreign ConfigMap data %v after retries, want %v", cm.Data, foreignData)
	}
}

func TestStatus_GraphSummaryOfFailedAndBlockedNodes(t *testing.T) {
	f, _ := refusedConfig(t, map[string]string{"k": "theirs"})
	cmID := "ConfigMap " + f.ns + "/app-config"

	// The graph summary counts nodes by state and names those not ready, failed first.
	g := f.status("app").Graph
	if g == nil {
		t.Fatal("status.graph is empty")
	}
	type counts struct{ total, ready, waiting, failed, blocked int32 }
	if got, want := (counts{g.Total, g.Ready, g.Waiting, g.Failed, g.Blocked}), (counts{4, 2, 0, 1, 1}); got != want {
		t.Errorf("status.graph counts %+v, want %+v", got, want)
	}
	type entry struct {
		kind, ns, name string
		state          kdagv1alpha1.NodeState
	}
	var got []entry
	for _, n := range g.NotReady {
		got = append(got, entry{n.Kind, n.Namespace, n.Name, n.State})
	}
	want := []entry{{"ConfigMap", f.ns, "app-config", kdagv1alpha1.NodeFailed}, {"Deployment", f.ns, "app", kdagv1alpha1.NodeBlocked}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("status.graph.notReady %+v, want %+v", got, want)
	}
	if msg := g.NotReady[0].Message; !strings.Contains(msg, kdagv1alpha1.AnnotationAdopt) {
		t.Errorf("failed node message %q, want the adoption hint", msg)
	}
	if msg := g.NotReady[1].Message; !strings.Contains(msg, cmID) {
		t.Errorf("blocked node message %q, want it to name the failed blocker %s", msg, cmID)
	}
}

func TestAdoption_AdoptOptionTakesOver(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true, configOpts: []controller.NodeOption{controller.Adopt()}})
	f.preCreateConfig("app", map[string]string{"k": "theirs"})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "ours"}})
	f.settle("app")

	cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap)
	w := f.get(&testapi.Widget{}, "app")
	if cm.Labels[kdagv1alpha1.LabelOwnerUID] != string(w.GetUID()) || cm.Labels[kdagv1alpha1.LabelController] != f.name {
		t.Errorf("adopted ConfigMap labels %v, want kdag's labels for owner %s", cm.Labels, w.GetUID())
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != w.GetUID() {
		t.Errorf("adopted ConfigMap owner references %+v, want the Widget", cm.OwnerReferences)
	}
	if want := map[string]string{"k": "ours"}; !maps.Equal(cm.Data, want) {
		t.Errorf("adopted ConfigMap data %v, want %v", cm.Data, want)
	}
	f.get(&appsv1.Deployment{}, "app")
	if ready := condition(f.status("app"), kdagv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition %+v, want True", ready)
	}
	f.waitEvent("app", corev1.EventTypeNormal, "Adopted")
}

// TestAdoption_AdoptReplacesAnotherController: adopting an object another controller controls
// (a StatefulSet's claim under its Delete retention policy) makes kdag's owner its only
// controller, keeping its other owner references; an apply that added kdag's controller beside
// the other would be refused (one controller per object), and the owner Stalled.
func TestAdoption_AdoptReplacesAnotherController(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []controller.NodeOption
	}{
		{"adopt", []controller.NodeOption{controller.Adopt()}},
		{"adopt, create-only", []controller.NodeOption{controller.Adopt(), controller.CreateOnly()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true, configOpts: tc.opts})
			ctx := context.Background()
			refs := make([]metav1.OwnerReference, 0, 2)
			for _, name := range []string{"boss", "friend"} {
				o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
				if err := f.cl.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				refs = append(refs, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: o.UID, Controller: ptr.To(name == "boss")})
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-config", OwnerReferences: refs}}
			if err := f.cl.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "ours"}})
			f.settle("app")

			w := f.get(&testapi.Widget{}, "app")
			cm = f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap)
			var got []string
			for _, r := range cm.OwnerReferences {
				got = append(got, fmt.Sprintf("%s %s controller=%v", r.Kind, r.Name, ptr.Deref(r.Controller, false)))
			}
			slices.Sort(got)
			if want := []string{"ConfigMap friend controller=false", "Widget app controller=true"}; !slices.Equal(got, want) {
				t.Errorf("adopted ConfigMap owner references %v, want %v", got, want)
			}
			if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != w.GetUID() {
				t.Errorf("controller %+v, want the Widget", ref)
			}
			if ready := condition(f.status("app"), kdagv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
				t.Errorf("Ready condition %+v, want True", ready)
			}
		})
	}
}
