// Package e2e runs kdag controllers against the local kwok cluster (pkg/testing/cluster), where
// Deployments roll out, Jobs complete and the garbage collector runs.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

var (
	local  *cluster.Cluster
	scheme = runtime.NewScheme()
	cl     client.Client
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	os.Exit(cluster.Main(cluster.Options{Name: "kdag-e2e", Log: os.Stderr}, func(c *cluster.Cluster) int {
		local = c
		return run(m)
	}))
}

func run(m *testing.M) int {
	var err error
	if cl, err = client.New(local.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := local.InstallCRDs(context.Background(), testapi.CRDs()...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// rolloutRM: a ConfigMap, a Deployment that needs it, and a ConfigMap "after" that needs the
// Deployment to be Available.
type rolloutRM struct{}

func (rolloutRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}}
}

func (rolloutRM) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	labels := map[string]string{"app": w.Name}
	config := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data})
	deploy := b.Add(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(w.Spec.Replicas, 2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}, controller.DependsOn(config))
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-after"}}, controller.DependsOn(deploy))
	return nil
}

// startManager runs a manager with one registered kdag controller until the test ends; a failing
// test shows the manager's log (controllertest.StartManager).
func startManager(t *testing.T, name string, rm controller.ResourceManager[*testapi.Widget]) {
	t.Helper()
	controllertest.StartManager(t, local.Config, scheme, []controller.Component{controller.For(name, rm)}, controllertest.ManagerOptions{})
}

func TestController_DeploymentGatesDependentUntilAvailable(t *testing.T) {
	startManager(t, "rollout", rolloutRM{})
	ns := local.Namespace(t)
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: testapi.WidgetSpec{MaxReplicas: 5}}
	if err := cl.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "Widget Ready", 60*time.Second, func(ctx context.Context) bool {
		got := &testapi.Widget{}
		return cl.Get(ctx, client.ObjectKeyFromObject(w), got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, kdagv1alpha1.ConditionReady) &&
			got.Status.ObservedGeneration == got.Generation
	})
	d := &appsv1.Deployment{}
	after := &corev1.ConfigMap{}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-after"}, after); err != nil {
		t.Fatal(err)
	}
	var available *appsv1.DeploymentCondition
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == appsv1.DeploymentAvailable && d.Status.Conditions[i].Status == corev1.ConditionTrue {
			available = &d.Status.Conditions[i]
		}
	}
	if available == nil || d.Status.AvailableReplicas != 2 {
		t.Fatalf("deployment status %+v: want Available with 2 replicas", d.Status)
	}
	// The dependent was created after the Deployment turned Available (both times have second
	// precision, so equal is allowed).
	if after.CreationTimestamp.Before(&available.LastTransitionTime) {
		t.Fatalf("ConfigMap web-after created at %s, before the Deployment was Available at %s",
			after.CreationTimestamp, available.LastTransitionTime)
	}
}

func TestController_GarbageCollectorRemovesObjectsOfDeletedOwner(t *testing.T) {
	startManager(t, "gc", rolloutRM{})
	ns := local.Namespace(t)
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}, Spec: testapi.WidgetSpec{MaxReplicas: 5}}
	if err := cl.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "Deployment created", 60*time.Second, func(ctx context.Context) bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, &appsv1.Deployment{}) == nil
	})
	if err := cl.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "objects garbage-collected", 60*time.Second, func(ctx context.Context) bool {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, &appsv1.Deployment{})) &&
			apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone-config"}, &corev1.ConfigMap{}))
	})
}
