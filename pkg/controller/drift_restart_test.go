package controller_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/openapi"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/resources/schemas"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// listsRM builds objects with the fields the API server's schema treats other than a map of
// scalars: a Deployment with env vars and container ports (lists keyed by name, by containerPort
// and a defaulted protocol), a Service with a port and an atomic selector, a Secret written through
// stringData (the API server stores data instead), a ConfigMap, and a child Widget (a custom
// resource, with a set and CRD defaults).
type listsRM struct{}

func (listsRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}, &appsv1.Deployment{}, &testapi.Widget{}}
}

func (listsRM) AddResources(_ context.Context, owner *testapi.Widget, b *controller.Graph) error {
	w := owner
	labels := map[string]string{"app": w.Name}
	if w.Labels[childLabel] != "" {
		return nil // a child Widget has no graph of its own here
	}
	cm := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"k": "v"}})
	secret := b.Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-creds"},
		StringData: map[string]string{"password": "not-generated"},
	})
	b.Add(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	})
	b.Add(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.27",
					Env:   []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "LEVEL", Value: "3"}},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
				}}},
			},
		},
	}, controller.DependsOn(cm, secret), controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	b.Add(&testapi.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-child", Labels: map[string]string{childLabel: "true"}},
		Spec:       testapi.WidgetSpec{MaxReplicas: 3, Components: []string{"a", "b"}, Data: map[string]string{"k": "v"}},
	}, controller.ReadyWhen(func(client.Object) (bool, error) { return true, nil }))
	return nil
}

const childLabel = "test.kdag.dev/child"

// TestDrift_ListFieldRemovedWhileDownIsRepaired is issue 13, item 10: an edit by someone else
// while kdag was not running — a list item removed or replaced, an atomic map changed — is found
// after the restart from kdag's managed-fields entry and the API server's schema, with no memory
// of the earlier process, and repaired by one apply.
func TestDrift_ListFieldRemovedWhileDownIsRepaired(t *testing.T) {
	webContainer := func(o client.Object) *corev1.Container {
		return &o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
	}
	hasEnv := func(o client.Object, name, value string) bool {
		return slices.ContainsFunc(webContainer(o).Env, func(e corev1.EnvVar) bool { return e.Name == name && e.Value == value })
	}
	tests := []struct {
		name    string
		obj     func() client.Object
		objName string
		edit    func(client.Object)
		// repaired reports whether obj (from the API server) holds kdag's value again.
		repaired func(client.Object) bool
		// path is the field the DriftRepaired event names.
		path string
	}{
		{
			name: "env var removed", obj: func() client.Object { return &appsv1.Deployment{} }, objName: "app",
			edit:     func(o client.Object) { webContainer(o).Env = webContainer(o).Env[1:] },
			repaired: func(o client.Object) bool { return hasEnv(o, "MODE", "prod") },
			path:     ".spec.template.spec.containers[name=web].env[name=MODE]",
		},
		{
			name: "container port removed", obj: func() client.Object { return &appsv1.Deployment{} }, objName: "app",
			edit: func(o client.Object) { webContainer(o).Ports = webContainer(o).Ports[:1] },
			repaired: func(o client.Object) bool {
				return slices.ContainsFunc(webContainer(o).Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 9090 })
			},
			path: ".spec.template.spec.containers[name=web].ports[containerPort=9090,protocol=TCP]",
		},
		{
			name: "env var value changed", obj: func() client.Object { return &appsv1.Deployment{} }, objName: "app",
			edit:     func(o client.Object) { webContainer(o).Env[1].Value = "9" },
			repaired: func(o client.Object) bool { return hasEnv(o, "LEVEL", "3") },
			path:     ".spec.template.spec.containers[name=web].env[name=LEVEL].value",
		},
		{
			// DEBUG is the other writer's: kdag does not set it, so it stays (like a foreign annotation).
			name: "env var replaced by another", obj: func() client.Object { return &appsv1.Deployment{} }, objName: "app",
			edit:     func(o client.Object) { webContainer(o).Env[0] = corev1.EnvVar{Name: "DEBUG", Value: "1"} },
			repaired: func(o client.Object) bool { return hasEnv(o, "MODE", "prod") },
			path:     ".spec.template.spec.containers[name=web].env[name=MODE]",
		},
		{
			name: "service port removed", obj: func() client.Object { return &corev1.Service{} }, objName: "app",
			edit: func(o client.Object) {
				o.(*corev1.Service).Spec.Ports = []corev1.ServicePort{{Name: "other", Port: 81, Protocol: corev1.ProtocolTCP}}
			},
			repaired: func(o client.Object) bool {
				return slices.ContainsFunc(o.(*corev1.Service).Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 80 })
			},
			path: ".spec.ports[port=80,protocol=TCP]",
		},
		{
			// Service.spec.selector is an atomic map: the update takes it whole from kdag.
			name: "atomic map gained a key", obj: func() client.Object { return &corev1.Service{} }, objName: "app",
			edit:     func(o client.Object) { o.(*corev1.Service).Spec.Selector["tier"] = "x" },
			repaired: func(o client.Object) bool { return len(o.(*corev1.Service).Spec.Selector) == 1 },
			path:     ".spec.selector",
		},
		{
			name: "custom resource set item removed", obj: func() client.Object { return &testapi.Widget{} }, objName: "app-child",
			edit:     func(o client.Object) { o.(*testapi.Widget).Spec.Components = []string{"a"} },
			repaired: func(o client.Object) bool { return slices.Contains(o.(*testapi.Widget).Spec.Components, "b") },
			path:     ".spec.components[=b]",
		},
		{
			name: "label removed", obj: func() client.Object { return &corev1.ConfigMap{} }, objName: "app-config",
			edit:     func(o client.Object) { delete(o.GetLabels(), kdagv1alpha1.LabelManagedBy) },
			repaired: func(o client.Object) bool { return o.GetLabels()[kdagv1alpha1.LabelManagedBy] == "kdag" },
			path:     `.metadata.labels["app.kubernetes.io/managed-by"]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, listsRM{})
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
			f.settle("app")

			// The operator goes down; someone edits the object; a new process starts.
			f.restart()
			edited := f.foreignUpdate(tt.obj(), tt.objName, tt.edit)
			if tt.repaired(edited) {
				t.Fatal("the foreign edit did not change the object")
			}
			f.calls.Reset()
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if writes := f.objectWrites(); len(writes) != 1 {
				t.Errorf("repairing reconcile wrote %v, want exactly one apply", writes)
			}
			live := f.get(tt.obj(), tt.objName)
			if !tt.repaired(live) {
				t.Fatalf("after reconcile the foreign edit is still there: %+v", live)
			}
			ev := f.waitEvent("app", corev1.EventTypeNormal, "DriftRepaired")
			if !strings.Contains(ev.Note, tt.objName) || !strings.Contains(ev.Note, tt.path) {
				t.Errorf("DriftRepaired event note %q does not name %s and %s", ev.Note, tt.objName, tt.path)
			}

			// Once the cache holds the repaired object, nothing is left to do.
			f.waitCachedVersion(tt.obj(), tt.objName, live.GetResourceVersion())
			f.calls.Reset()
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("reconcile after repair: %v", err)
			}
			if writes := f.objectWrites(); len(writes) != 0 {
				t.Fatalf("reconcile after repair wrote %v, want no write", writes)
			}
		})
	}
}

// TestDrift_NoFalsePositiveAfterRestart: a restarted process checks every settled object once
// against the API server's schema and finds nothing to repair — server defaults (a Service's
// clusterIP, port protocols), a Secret's stringData stored as data, a custom resource's defaults —
// and then remembers them as verified, so that the next reconcile checks nothing.
func TestDrift_NoFalsePositiveAfterRestart(t *testing.T) {
	f := newFixture(t, listsRM{})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")

	f.restart()
	f.calls.Reset()
	for i := range 2 {
		if err := f.reconcile("app"); err != nil {
			t.Fatalf("reconcile %d after restart: %v", i, err)
		}
		if writes := f.objectWrites(); len(writes) != 0 {
			t.Fatalf("reconcile %d after restart wrote %v, want no write", i, writes)
		}
	}
	for _, o := range []struct {
		obj  client.Object
		name string
	}{
		{&appsv1.Deployment{}, "app"}, {&corev1.Service{}, "app"}, {&corev1.Secret{}, "app-creds"},
		{&corev1.ConfigMap{}, "app-config"}, {&testapi.Widget{}, "app-child"},
	} {
		live := f.get(o.obj, o.name)
		if !controller.Engine(f.reconciler()).Verified(live) {
			t.Errorf("%T %s is not remembered as verified after the restarted process checked it", o.obj, o.name)
		}
	}
}

// unreachableSchemas is an OpenAPI client whose every request fails.
type unreachableSchemas struct{}

func (unreachableSchemas) Paths() (map[string]openapi.GroupVersion, error) {
	return nil, errors.New("injected: OpenAPI unreachable")
}

// TestDrift_SchemaUnavailableAppliesOnce: when the API server's schema cannot be had, the
// restarted process cannot tell whether someone removed a field kdag set, so it applies each
// object once (which repairs any such removal) instead of failing the node, and then, the apply's
// response remembered as verified, leaves the objects alone.
func TestDrift_SchemaUnavailableAppliesOnce(t *testing.T) {
	f := newFixture(t, listsRM{})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")

	f.restart()
	cl, reader := controller.Clients(f.reconciler())
	engine, err := apply.New(cl, reader, schemas.NewProvider(unreachableSchemas{}, schemas.Options{}), apply.Options{FieldManager: f.fieldManager})
	if err != nil {
		t.Fatal(err)
	}
	controller.SetEngine(f.reconciler(), engine)
	f.foreignUpdate(&appsv1.Deployment{}, "app", func(o client.Object) {
		c := &o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
		c.Env = c.Env[1:]
	})
	f.calls.Reset()
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	writes := f.objectWrites()
	for _, kind := range []string{"/configmaps/", "/secrets/", "/services/", "/deployments/", "/widgets/app-child"} {
		if !slices.ContainsFunc(writes, func(w string) bool { return strings.HasPrefix(w, "PATCH ") && strings.Contains(w, kind) }) {
			t.Errorf("writes %v: no apply of %s", writes, kind)
		}
	}
	d := f.get(&appsv1.Deployment{}, "app").(*appsv1.Deployment)
	if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 2 || env[0].Name != "MODE" {
		t.Errorf("env after the apply = %v, want MODE back", env)
	}

	f.waitCachedVersion(&appsv1.Deployment{}, "app", d.ResourceVersion)
	f.calls.Reset()
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	if writes := f.objectWrites(); len(writes) != 0 {
		t.Errorf("second reconcile wrote %v, want no write", writes)
	}
}
