package apiserver

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/resources/schemas"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

const kdagManager = "kdag"

// obj decodes a YAML manifest.
func obj(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("parse manifest: %v\n%s", err, manifest)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatalf("decode manifest: %v\n%s", err, manifest)
	}
	return u
}

// describe names u as "Kind namespace/name" for failure messages.
func describe(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// desiredDeployment is what a ResourceManager would build: a typed Deployment prepared by Desired.
func desiredDeployment(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
						Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "LEVEL", Value: "3"}}},
					{Name: "sidecar", Image: "busybox:1.36", Args: []string{"sleep", "infinity"}},
				}},
			},
		},
	}
	u, err := resources.Desired(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func desiredConfigMap(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg", Labels: map[string]string{"app": "web", "tier": "config"}},
		Data:       map[string]string{"key": "value", "other": "x"},
	}
	u, err := resources.Desired(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func desiredService(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			// No protocol: the API server defaults it, and it is part of the list key.
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	u, err := resources.Desired(svc, corev1.SchemeGroupVersion.WithKind("Service"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func apply(t *testing.T, u *unstructured.Unstructured, manager string, force bool) {
	t.Helper()
	opts := []client.ApplyOption{client.FieldOwner(manager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u.DeepCopy()), opts...); err != nil {
		t.Fatalf("apply %s as %s: %v", describe(u), manager, err)
	}
}

func getLive(t *testing.T, like *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(like.GroupVersionKind())
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(like), live); err != nil {
		t.Fatalf("get %s: %v", describe(like), err)
	}
	return live
}

// foreignUpdate reads the object into a typed obj, lets edit change it and writes it back with a
// plain update as field manager "kubectl-edit", as `kubectl edit` does.
func foreignUpdate[T client.Object](t *testing.T, desired *unstructured.Unstructured, obj T, edit func(T)) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(desired), obj); err != nil {
		t.Fatal(err)
	}
	edit(obj)
	if err := env.Client.Update(ctx, obj, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatalf("foreign update of %s: %v", describe(desired), err)
	}
}

func TestDrift_AgainstAPIServer(t *testing.T) {
	tests := []struct {
		name    string
		desired func(t *testing.T, ns string) *unstructured.Unstructured
		// foreign is what happens after kdag's first apply.
		foreign func(t *testing.T, desired *unstructured.Unstructured)
		// check, when set, turns desired into the object Drift compares with.
		check func(desired *unstructured.Unstructured) *unstructured.Unstructured
		want  []string
	}{
		{
			name:    "a: kdag's own apply is not drift",
			desired: desiredDeployment,
			foreign: func(*testing.T, *unstructured.Unstructured) {},
		},
		{
			name:    "b: foreign update of spec.replicas",
			desired: desiredDeployment,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &appsv1.Deployment{}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })
			},
			want: []string{".spec.replicas"},
		},
		{
			name:    "c: foreign annotation kdag does not set",
			desired: desiredDeployment,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &appsv1.Deployment{}, func(d *appsv1.Deployment) {
					d.Annotations = map[string]string{"example.com/note": "hello"}
				})
			},
		},
		{
			name:    "d: foreign update of a container image",
			desired: desiredDeployment,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &appsv1.Deployment{}, func(d *appsv1.Deployment) {
					d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
				})
			},
			want: []string{".spec.template.spec.containers[name=web].image"},
		},
		{
			name:    "d2: foreign update of an atomic list (args)",
			desired: desiredDeployment,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &appsv1.Deployment{}, func(d *appsv1.Deployment) {
					d.Spec.Template.Spec.Containers[1].Args = []string{"sleep", "10"}
				})
			},
			want: []string{".spec.template.spec.containers[name=sidecar].args"},
		},
		{
			name:    "e: kdag's forced re-apply takes ownership back",
			desired: desiredDeployment,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &appsv1.Deployment{}, func(d *appsv1.Deployment) {
					d.Spec.Replicas = ptr.To[int32](5)
					d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
				})
				apply(t, u, kdagManager, true)
			},
		},
		{
			name:    "f: foreign apply of the same value shares ownership",
			desired: desiredDeployment,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				shared := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "apps/v1", "kind": "Deployment",
					"metadata": map[string]any{"namespace": u.GetNamespace(), "name": u.GetName()},
					"spec":     map[string]any{"replicas": int64(2)},
				}}
				apply(t, shared, "helm", false)
				if fields := managerFields(getLive(t, u), "helm", ""); !strings.Contains(fields, `"f:replicas"`) {
					t.Fatalf("helm does not co-own spec.replicas: %s", fields)
				}
			},
		},
		{
			name:    "g: status written through the status subresource by another manager",
			desired: desiredDeployment,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				ctx := context.Background()
				d := &appsv1.Deployment{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), d); err != nil {
					t.Fatal(err)
				}
				d.Status.Replicas = 7
				if err := env.Client.Status().Update(ctx, d, client.FieldOwner("other-controller")); err != nil {
					t.Fatal(err)
				}
				if fields := managerFields(getLive(t, u), "other-controller", "status"); !strings.Contains(fields, `"f:replicas"`) {
					t.Fatalf("other-controller owns no status.replicas: %s", fields)
				}
			},
			// A desired object that does mention status.replicas, with another value: only the
			// Subresource rule keeps the status writer out.
			check: func(u *unstructured.Unstructured) *unstructured.Unstructured {
				c := u.DeepCopy()
				c.Object["status"] = map[string]any{"replicas": int64(1)}
				return c
			},
		},
		{
			name:    "configmap: foreign update of a data key",
			desired: desiredConfigMap,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) { cm.Data["key"] = "edited" })
			},
			want: []string{".data.key"},
		},
		{
			name:    "configmap: foreign data key kdag does not set",
			desired: desiredConfigMap,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) { cm.Data["added"] = "by hand" })
			},
		},
		{
			name:    "service: foreign update of a port, keyed by port and defaulted protocol",
			desired: desiredService,
			foreign: func(t *testing.T, u *unstructured.Unstructured) {
				foreignUpdate(t, u, &corev1.Service{}, func(s *corev1.Service) {
					s.Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
				})
			},
			want: []string{".spec.ports[port=80,protocol=TCP].targetPort"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			desired := tt.desired(t, ns)
			apply(t, desired, kdagManager, true)
			tt.foreign(t, desired)
			check := desired
			if tt.check != nil {
				check = tt.check(desired)
			}
			live := getLive(t, desired)
			got, err := resources.Drift(live, check, kdagManager)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Drift = %q, want %q\nmanaged fields: %s", got, tt.want, dumpManagedFields(live))
			}
		})
	}
}

// managerFields returns the FieldsV1 of manager's entry for subresource, or "".
func managerFields(live *unstructured.Unstructured, manager, subresource string) string {
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == manager && mf.Subresource == subresource && mf.FieldsV1 != nil {
			return mf.FieldsV1.GetRawString()
		}
	}
	return ""
}

func dumpManagedFields(live *unstructured.Unstructured) string {
	var b strings.Builder
	for _, mf := range live.GetManagedFields() {
		b.WriteString("\n  " + mf.Manager + " " + string(mf.Operation) + " " + mf.Subresource + " " + mf.FieldsV1.GetRawString())
	}
	return b.String()
}

// typeConverter returns a type converter backed by the test API server's OpenAPI schemas (one
// Provider for the package, as an operator process has), once the API server publishes the
// schema of gv: it does so shortly after a CRD is installed, not at once.
func typeConverter(t *testing.T, gv schema.GroupVersion) managedfields.TypeConverter {
	t.Helper()
	providerOnce.Do(func() {
		provider, providerErr = schemas.NewProviderForConfig(env.Config, nil, schemas.Options{})
	})
	if providerErr != nil {
		t.Fatal(providerErr)
	}
	ctx := context.Background()
	var err error
	if pollErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = provider.TypeConverter(ctx, gv)
		return err == nil, nil
	}); pollErr != nil {
		t.Fatalf("schema of %s: %v", gv, err)
	}
	return provider.WithContext(ctx)
}

var (
	providerOnce sync.Once
	provider     *schemas.Provider
	providerErr  error
)

func desiredSecret(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	u, err := resources.Desired(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds", Labels: map[string]string{"app": "web"}},
		StringData: map[string]string{"password": "s3cr3t"},
	}, corev1.SchemeGroupVersion.WithKind("Secret"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// desiredWidget is a custom resource whose CRD defaults two fields kdag does not set.
func desiredWidget(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	u, err := resources.Desired(&testapi.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child", Labels: map[string]string{"app": "web"}},
		Spec:       testapi.WidgetSpec{Replicas: ptr.To[int32](2), Components: []string{"a", "b"}, Data: map[string]string{"k": "v"}},
	}, testapi.GroupVersion.WithKind("Widget"))
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "spec", "minReplicas") // left to the CRD's default
	unstructured.RemoveNestedField(u.Object, "spec", "maxReplicas")
	return u
}

// desiredQuantities is a Deployment written by hand, with a quantity in a form the API server
// stores differently ("0.5" becomes "500m") and a port whose protocol (a key field) it defaults.
func desiredQuantities(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	return obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: `+ns+`, name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 8080}]
        resources: {requests: {cpu: "0.5", memory: 1024Mi}, limits: {cpu: "1"}}
`)
}

func webContainer(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.Containers[0] }

// TestMissingFields_AgainstAPIServer checks MissingFields against the field sets and schemas of
// the real API server: nothing is reported for objects as kdag applied them (server defaults, a
// Secret's write-only stringData, quantities, defaulted key fields, a CRD's defaults), and a field
// someone removed or replaced with a plain update is reported, list items and atomic maps
// included.
func TestMissingFields_AgainstAPIServer(t *testing.T) {
	deploy := func(edit func(*appsv1.Deployment)) func(*testing.T, *unstructured.Unstructured) {
		return func(t *testing.T, d *unstructured.Unstructured) { foreignUpdate(t, d, &appsv1.Deployment{}, edit) }
	}
	tests := []struct {
		name    string
		desired func(*testing.T, string) *unstructured.Unstructured
		edit    func(t *testing.T, desired *unstructured.Unstructured) // by someone else, after kdag's apply
		want    []string
	}{
		{name: "configmap as applied", desired: desiredConfigMap},
		{name: "deployment as applied", desired: desiredDeployment},
		{name: "deployment with quantities and a defaulted key field as applied", desired: desiredQuantities},
		{name: "service as applied", desired: desiredService},
		{name: "secret with stringData as applied", desired: desiredSecret},
		{name: "custom resource with defaults as applied", desired: desiredWidget},
		{name: "foreign annotation added", desired: desiredConfigMap, edit: func(t *testing.T, d *unstructured.Unstructured) {
			foreignUpdate(t, d, &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"example.com/note": "x"} })
		}},
		{name: "label removed", desired: desiredConfigMap, want: []string{".metadata.labels.tier"}, edit: func(t *testing.T, d *unstructured.Unstructured) {
			foreignUpdate(t, d, &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) { delete(cm.Labels, "tier") })
		}},
		{name: "data key removed and another changed", desired: desiredConfigMap, want: []string{".data.key", ".data.other"}, edit: func(t *testing.T, d *unstructured.Unstructured) {
			foreignUpdate(t, d, &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) { delete(cm.Data, "other"); cm.Data["key"] = "changed" })
		}},
		{name: "secret label removed", desired: desiredSecret, want: []string{".metadata.labels.app"}, edit: func(t *testing.T, d *unstructured.Unstructured) {
			foreignUpdate(t, d, &corev1.Secret{}, func(s *corev1.Secret) { delete(s.Labels, "app") })
		}},
		{name: "deployment replicas changed", desired: desiredDeployment, want: []string{".spec.replicas"},
			edit: deploy(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })},
		{name: "env var removed", desired: desiredDeployment, want: []string{".spec.template.spec.containers[name=web].env[name=MODE]"},
			edit: deploy(func(d *appsv1.Deployment) { webContainer(d).Env = webContainer(d).Env[1:] })},
		{name: "env var value changed", desired: desiredDeployment, want: []string{".spec.template.spec.containers[name=web].env[name=LEVEL].value"},
			edit: deploy(func(d *appsv1.Deployment) { webContainer(d).Env[1].Value = "9" })},
		{name: "container port removed", desired: desiredDeployment, want: []string{".spec.template.spec.containers[name=web].ports[containerPort=80,protocol=TCP]"},
			edit: deploy(func(d *appsv1.Deployment) { webContainer(d).Ports = nil })},
		{name: "container removed", desired: desiredDeployment, want: []string{".spec.template.spec.containers[name=sidecar]"},
			edit: deploy(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[:1] })},
		{name: "atomic list replaced", desired: desiredDeployment, want: []string{".spec.template.spec.containers[name=sidecar].args"},
			edit: deploy(func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[1].Args = []string{"sleep", "infinity", "x"}
			})},
		{name: "quantity removed", desired: desiredQuantities, want: []string{".spec.template.spec.containers[name=web].resources.limits.cpu"},
			edit: deploy(func(d *appsv1.Deployment) { webContainer(d).Resources.Limits = nil })},
		{name: "atomic map with a key added", desired: desiredService, want: []string{".spec.selector"}, edit: func(t *testing.T, d *unstructured.Unstructured) {
			foreignUpdate(t, d, &corev1.Service{}, func(s *corev1.Service) { s.Spec.Selector["tier"] = "x" })
		}},
		{name: "service port removed", desired: desiredService, want: []string{".spec.ports[port=80,protocol=TCP]"}, edit: func(t *testing.T, d *unstructured.Unstructured) {
			foreignUpdate(t, d, &corev1.Service{}, func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Name: "other", Port: 81, Protocol: corev1.ProtocolTCP}}
			})
		}},
		{name: "custom resource set item removed", desired: desiredWidget, want: []string{".spec.components[=b]"}, edit: func(t *testing.T, d *unstructured.Unstructured) {
			w := &unstructured.Unstructured{}
			w.SetGroupVersionKind(d.GroupVersionKind())
			foreignUpdate(t, d, w, func(w *unstructured.Unstructured) {
				_ = unstructured.SetNestedStringSlice(w.Object, []string{"a"}, "spec", "components")
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			desired := tt.desired(t, ns)
			apply(t, desired, kdagManager, true)
			if tt.edit != nil {
				tt.edit(t, desired)
			}
			live := getLive(t, desired)
			got, err := resources.MissingFields(live, desired, kdagManager, typeConverter(t, desired.GroupVersionKind().GroupVersion()))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("MissingFields = %q, want %q\nmanaged fields: %s", got, tt.want, dumpManagedFields(live))
			}
			if tt.edit == nil {
				return
			}
			// kdag applies again: nothing is missing any more.
			apply(t, desired, kdagManager, true)
			live = getLive(t, desired)
			if got, err := resources.MissingFields(live, desired, kdagManager, typeConverter(t, desired.GroupVersionKind().GroupVersion())); err != nil || got != nil {
				t.Errorf("after kdag's re-apply MissingFields = %q, %v; want nil\nmanaged fields: %s", got, err, dumpManagedFields(live))
			}
		})
	}

	t.Run("desired object that does not fit the schema: error names paths, not values", func(t *testing.T) {
		ns := env.Namespace(t)
		desired := desiredConfigMap(t, ns)
		apply(t, desired, kdagManager, true)
		// One misfit at a time: with several, which ones the converter reports first depends on
		// map order.
		for field, want := range map[string]string{
			"immutable": ".immutable: value does not match the schema", // a boolean field
			"extra":     ".extra: field not declared in schema",        // no such field
		} {
			misfit := desired.DeepCopy()
			misfit.Object[field] = "s3cr3t"
			_, err := resources.MissingFields(getLive(t, desired), misfit, kdagManager, typeConverter(t, corev1.SchemeGroupVersion))
			if err == nil {
				t.Fatalf("%s: no error", field)
			}
			msg := err.Error()
			for _, want := range []string{"ConfigMap " + ns + "/cfg", want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if strings.Contains(msg, "s3cr3t") {
				t.Errorf("error %q quotes a value", msg)
			}
		}
	})

	t.Run("no apply entry", func(t *testing.T) {
		ns := env.Namespace(t)
		desired := desiredConfigMap(t, ns)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}}
		if err := env.Client.Create(context.Background(), cm, client.FieldOwner(kdagManager)); err != nil {
			t.Fatal(err)
		}
		if got, err := resources.MissingFields(getLive(t, desired), desired, kdagManager, typeConverter(t, desired.GroupVersionKind().GroupVersion())); err != nil || got != nil {
			t.Errorf("MissingFields without an Apply entry = %q, %v; want nil, nil", got, err)
		}
	})
}
