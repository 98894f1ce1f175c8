package controller_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// secretApp is a ResourceManager with a generated Secret (create-only), an adopted ConfigMap and
// a Deployment that needs both.
type secretApp struct{}

func (secretApp) OwnedTypes() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &appsv1.Deployment{}}
}

func (secretApp) AddResources(_ context.Context, owner *testapi.Widget, b *controller.Graph) error {
	name := owner.GetName()
	secret := b.Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-secret"},
		Data:       map[string][]byte{"key": []byte("s3cr3t-data")},
		StringData: map[string]string{"password": "s3cr3t-string"},
	}, controller.CreateOnly())
	config := b.Add(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-config"},
		Data:       map[string]string{"mode": "fast"},
	}, controller.Adopt())
	b.Add(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
	}, controller.DependsOn(secret, config))
	return nil
}

func TestPlan_WriteText(t *testing.T) {
	scheme := testapi.NewScheme()
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app"}}
	plan, err := plan.NewPlan(t.Context(), secretApp{}, owner, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := plan.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	const want = `# Secret demo/app-secret  (create-only)
# ConfigMap demo/app-config  (adopt)
# Deployment demo/app  (after Secret demo/app-secret, ConfigMap demo/app-config)
---
# Secret demo/app-secret  (create-only)
apiVersion: v1
data:
  key: <generated when created; never printed>
kind: Secret
metadata:
  name: app-secret
  namespace: demo
stringData:
  password: <generated when created; never printed>
---
# ConfigMap demo/app-config  (adopt)
apiVersion: v1
data:
  mode: fast
kind: ConfigMap
metadata:
  name: app-config
  namespace: demo
---
# Deployment demo/app  (after Secret demo/app-secret, ConfigMap demo/app-config)
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: demo
spec:
  replicas: 1
  selector: null
  strategy: {}
  template:
    metadata: {}
    spec:
      containers: null
`
	if got := out.String(); got != want {
		t.Errorf("WriteText:\n%s\nwant:\n%s", got, want)
	}
	for _, secret := range []string{"s3cr3t", "czNjcjN0"} { // the value and its base64 prefix
		if strings.Contains(out.String(), secret) {
			t.Errorf("WriteText printed a Secret value (%q)", secret)
		}
	}
	// Redaction works on the rendering, not on the plan's objects.
	if s := plan.Nodes[0].Object.(*corev1.Secret); s.StringData["password"] != "s3cr3t-string" {
		t.Errorf("WriteText changed the plan's Secret: %v", s.StringData)
	}
	var again bytes.Buffer
	if err := plan.WriteText(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), again.Bytes()) {
		t.Error("WriteText is not deterministic")
	}
	if got, want := plan.Nodes[2].GVK, appsv1.SchemeGroupVersion.WithKind("Deployment"); got != want {
		t.Errorf("PlannedNode.GVK = %v, want %v", got, want)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestPlan_WriteTextReportsWriteError(t *testing.T) {
	scheme := testapi.NewScheme()
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app"}}
	plan, err := plan.NewPlan(t.Context(), secretApp{}, owner, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.WriteText(failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteText(failing writer) = %v, want the write error", err)
	}
}
