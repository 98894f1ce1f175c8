package plan_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// hooked is a ConfigMap and a BeforeDelete Job that backs it up.
type hooked struct{}

func (hooked) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &batchv1.Job{}}
}

func (hooked) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	cm := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"k": "v"}})
	b.Add(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-backup"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "backup", Image: "busybox:1.36"}},
		}}},
	}, controller.BeforeDelete(time.Minute), controller.After(cm))
	return nil
}

// TestLive_HookIsNotACreate: the live plan of a settled owner with a BeforeDelete hook, whose Job
// a reconcile never creates, reports no change: the hook is Unchanged, said to run only when the
// owner is deleted.
func TestLive_HookIsNotACreate(t *testing.T) {
	env := api.Env(t)
	ns := namespace(t, env, "live-hook")
	component := controller.For("hooked", hooked{})
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: testapi.WidgetSpec{MaxReplicas: 1}}
	if err := env.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	p, err := component.Plan(t.Context(), w, env.Scheme, env.Client.RESTMapper())
	if err != nil {
		t.Fatal(err)
	}
	owner := apply.Owner{Object: w, Kind: "Widget", Controller: component.Name()}
	nodes, err := p.Render(owner, env.Scheme, func(graph.NodeID) *unstructured.Unstructured { return nil })
	if err != nil {
		t.Fatal(err)
	}
	engine, err := apply.New(env.Client, env.Client, nil, apply.Options{FieldManager: component.FieldManager()})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.BeforeDelete == 0 { // as a reconcile: the hook is not applied
			if _, err := engine.Apply(t.Context(), owner, n.Desired, nil, apply.Policy{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out bytes.Buffer
	opts := plan.Options{Scheme: newScheme(t), Components: []controller.Component{component}, CRDs: os.DirFS("../testing/testapi/crd"),
		RESTConfig: env.Config}
	if err := plan.Run(t.Context(), []string{"--live", "widget/shop", "-n", ns}, &out, opts); err != nil {
		t.Fatalf("live plan of a settled owner with a hook: %v, want no changes\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "BeforeDelete hook: runs only when the owner is deleted") {
		t.Errorf("the plan does not say the hook runs only on deletion:\n%s", out.String())
	}
}
