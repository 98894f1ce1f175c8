package controller_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// referencingRM adds a ConfigMap from spec.data, a Secret, a claim and a Deployment that mounts
// the ConfigMap and the claim and reads the Secret through envFrom, with no DependsOn: every
// edge is inferred (issue 15). The claim is ready once Bound (its ReadyWhen: kdag's own rule
// counts a Pending claim as ready, see TestPendingClaim_DoesNotBlockItsConsumer).
var referencingRM = referencing(controller.ReadyWhen(func(live client.Object) (bool, error) {
	return live.(*corev1.PersistentVolumeClaim).Status.Phase == corev1.ClaimBound, nil
}))

// referencing is referencingRM with claimOpts on the claim's node.
func referencing(claimOpts ...controller.NodeOption) funcRM {
	return funcRM{add: func(w *testapi.Widget, b *controller.Graph) error {
		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: w.Spec.Data})
		b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-secret"}, StringData: map[string]string{"token": "t"}})
		b.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}, claimOpts...)
		b.Add(podDeployment(w.Name, corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "nginx:1.27",
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: w.Name + "-secret"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: w.Name + "-config"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: w.Name + "-data"}}},
			},
		}), controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
		return nil
	}}
}

// TestInferredDependencies_WaitsAndRolls: a Deployment that mounts a ConfigMap and a claim and
// reads a Secret, with no DependsOn, waits until all three are ready (the claim bound), and its
// pod template's dependencies hash changes, rolling its pods, when the ConfigMap's data does.
func TestInferredDependencies_WaitsAndRolls(t *testing.T) {
	f := newFixture(t, referencingRM.owning(&corev1.PersistentVolumeClaim{}))
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"mode": "fast"}})

	// envtest binds no claim: the claim waits (its ReadyWhen), and so does the Deployment.
	_ = f.reconcile("app")
	for _, o := range []struct {
		obj  client.Object
		name string
	}{{&corev1.ConfigMap{}, "app-config"}, {&corev1.Secret{}, "app-secret"}, {&corev1.PersistentVolumeClaim{}, "app-data"}} {
		if f.notFound(o.obj, o.name) {
			t.Fatalf("%T %s was not created", o.obj, o.name)
		}
	}
	if !f.notFound(&appsv1.Deployment{}, "app") {
		t.Fatal("the Deployment was applied before the claim it mounts was bound")
	}
	st := f.status("app")
	var deploy *kdagv1alpha1.GraphNode
	for i := range st.Graph.Nodes {
		if st.Graph.Nodes[i].Kind == "Deployment" {
			deploy = &st.Graph.Nodes[i]
		}
	}
	if deploy == nil || deploy.State != kdagv1alpha1.NodeBlocked {
		t.Fatalf("status graph %+v: want the Deployment blocked", st.Graph.Nodes)
	}
	if want := kdagv1alpha1.NodeIndices("0-2"); deploy.Blockers != want || deploy.Inferred != want {
		t.Errorf("Deployment blockers %v, inferred %v; want both %v", deploy.Blockers, deploy.Inferred, want)
	}

	bindClaim(f, "app-data")
	f.settle("app")
	before := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
	hash := before.Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash]
	if hash == "" {
		t.Fatalf("pod template annotations %v: no %s", before.Spec.Template.Annotations, kdagv1alpha1.AnnotationDependenciesHash)
	}

	f.updateWidget("app", func(w *testapi.Widget) { w.Spec.Data = map[string]string{"mode": "safe"} })
	f.settle("app")
	after := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
	if got := after.Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash]; got == hash || got == "" {
		t.Errorf("pod template %s %q after the ConfigMap changed, was %q: want a new hash (pods roll)",
			kdagv1alpha1.AnnotationDependenciesHash, got, hash)
	}
	if after.Generation == before.Generation {
		t.Errorf("Deployment generation stayed %d: the ConfigMap change did not roll its pods", after.Generation)
	}
}

// TestPendingClaim_DoesNotBlockItsConsumer: by kdag's own readiness rule a Pending claim is
// ready, so the Deployment that mounts it is applied (with a WaitForFirstConsumer class the claim
// binds only once that Deployment's pod is scheduled: waiting for Bound would wait forever), and
// the owner is Ready only when the Deployment is.
func TestPendingClaim_DoesNotBlockItsConsumer(t *testing.T) {
	f := newFixture(t, referencing().owning(&corev1.PersistentVolumeClaim{}))
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"mode": "fast"}})
	f.settle("app")
	if pvc := f.get(&corev1.PersistentVolumeClaim{}, "app-data").(*corev1.PersistentVolumeClaim); pvc.Status.Phase == corev1.ClaimBound {
		t.Fatalf("claim phase %s: envtest binds no claim", pvc.Status.Phase)
	}
	if f.notFound(&appsv1.Deployment{}, "app") {
		t.Fatal("the Deployment that mounts a Pending claim was not applied")
	}
	if ready := condition(f.status("app"), kdagv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v, want True (the Deployment is ready by its ReadyWhen)", ready)
	}
}

// bindClaim sets the named claim's phase to Bound, as the volume controller would, and waits
// for the cache.
func bindClaim(f *fixture, name string) {
	f.t.Helper()
	pvc := f.get(&corev1.PersistentVolumeClaim{}, name).(*corev1.PersistentVolumeClaim)
	pvc.Status.Phase = corev1.ClaimBound
	if err := f.cl.Status().Update(context.Background(), pvc); err != nil {
		f.t.Fatalf("bind claim %s: %v", name, err)
	}
	f.waitCachedVersion(&corev1.PersistentVolumeClaim{}, name, pvc.ResourceVersion)
}
