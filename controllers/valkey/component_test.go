package valkey

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/internal/operatortest"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
)

// api is the package's API server with the reference operator's CRDs, started by the first test
// that needs it (the golden-plan tests need none).
var api = operatortest.APIServer(scheme)

func TestMain(m *testing.M) { api.Main(m) }

// TestComponent runs the Valkey component under a real manager: what it writes, and when the
// Valkey is Ready.
func TestComponent(t *testing.T) {
	owner := defaulted(func(v *giteav1alpha1.Valkey) { v.Namespace, v.UID = "", "" })
	server := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey"}}
	applied := []string{
		"PATCH configmaps/demo-valkey-config",
		"PATCH deployments/demo-valkey",
		"PATCH services/demo-valkey",
		"PATCH valkeys/demo-valkey/status",
		"POST controllerrevisions", // the revision that records the writes
	}
	controllertest.RunCases(t, api, []controllertest.Case{{
		Name:   "ready once the server is available",
		Owner:  owner,
		Ready:  []client.Object{server},
		Want:   metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonReady},
		Writes: applied,
	}, {
		Name:   "waiting while the server is not available",
		Owner:  owner,
		Want:   metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: kdagv1alpha1.ReasonWaiting},
		Writes: applied,
	}, {
		Name:  "a ConfigMap of the same name that is not the Valkey's is never overwritten",
		Live:  []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey-config"}, Data: map[string]string{"mine": "yes"}}},
		Owner: owner,
		Want:  metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: kdagv1alpha1.ReasonNodeFailed},
		Writes: []string{
			"PATCH services/demo-valkey",
			"PATCH valkeys/demo-valkey/status",
			"POST controllerrevisions", // the revision that records the writes
		},
	}}, controller.For("valkey", ResourceManager{}))
}
