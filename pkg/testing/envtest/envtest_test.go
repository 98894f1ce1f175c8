package envtest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	os.Exit(leak.Check(func() int {
		return envtest.Main(m, &env, envtest.Options{CRDs: testapi.CRDs(), Scheme: scheme})
	}))
}

func TestEnvironment_CELRuleRejectsWithItsMessage(t *testing.T) {
	ns := env.Namespace(t)
	w := &testapi.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec:       testapi.WidgetSpec{MinReplicas: 5, MaxReplicas: 1},
	}
	err := env.Client.Create(context.Background(), w)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create widget with minReplicas > maxReplicas: want Invalid, got %v", err)
	}
	if want := "minReplicas must not be greater than maxReplicas"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not carry the CEL rule's message %q", err, want)
	}
}

func TestEnvironment_SchemaDefaultsApplied(t *testing.T) {
	ns := env.Namespace(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": testapi.GroupVersion.String(), "kind": "Widget",
		"metadata": map[string]any{"namespace": ns, "name": "defaults"},
		"spec":     map[string]any{},
	}}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("create widget: %v", err)
	}
	got := &testapi.Widget{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(u), got); err != nil {
		t.Fatalf("get widget: %v", err)
	}
	if got.Spec.MaxReplicas != 10 {
		t.Fatalf("spec.maxReplicas = %d, want the schema default 10", got.Spec.MaxReplicas)
	}
}

func TestEnvironment_ServerSideApplyRecordsManagedFields(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "applied"},
		"data":     map[string]any{"key": "value"},
	}}
	if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kdag-test")); err != nil {
		t.Fatalf("apply configmap: %v", err)
	}
	live := &unstructured.Unstructured{}
	live.SetAPIVersion("v1")
	live.SetKind("ConfigMap")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
		t.Fatalf("get configmap: %v", err)
	}
	var found bool
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == "kdag-test" && mf.Operation == metav1.ManagedFieldsOperationApply {
			found = true
			if !strings.Contains(mf.FieldsV1.GetRawString(), `"f:key"`) {
				t.Errorf("managed fields of kdag-test %s do not list f:data/f:key", mf.FieldsV1.GetRawString())
			}
		}
	}
	if !found {
		t.Fatalf("no Apply entry for field manager kdag-test in %+v", live.GetManagedFields())
	}
}

// TestEnvironment_ServiceIPsBeyondASlash24: the API server allocates cluster IPs from a /16, so a
// test process's Services (namespaces are never deleted on envtest) do not run out at 254: a
// Service asks for an address outside envtest's default 10.0.0.0/24 and gets it.
func TestEnvironment_ServiceIPsBeyondASlash24(t *testing.T) {
	ns := env.Namespace(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "beyond"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.200.7",
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := env.Client.Create(t.Context(), svc); err != nil {
		t.Fatalf("a Service with cluster IP 10.0.200.7: %v", err)
	}
}
