package giteaserver

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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

// TestComponent runs the GiteaServer component under a real manager: the database Secret it
// references gates the migration and the server; the claim, the migration Job and the
// Deployment gate Ready in turn.
func TestComponent(t *testing.T) {
	owner := defaulted(func(s *giteav1alpha1.GiteaServer) { s.Namespace, s.UID = "", "" })
	database := func(keys ...string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-postgresql-credentials"}, StringData: map[string]string{}}
		for _, k := range keys {
			s.StringData[k] = "x"
		}
		return s
	}
	ready := []client.Object{
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "demo-data"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "demo-migrate-1-27-3"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
	}
	controllertest.RunCases(t, api, []controllertest.Case{{
		Name:  "ready once migrated and available",
		Live:  []client.Object{database("database", "host", "password", "port", "user")},
		Owner: owner,
		Ready: ready,
		Want:  metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonReady},
		Writes: []string{
			"PATCH configmaps/demo-config",
			"PATCH deployments/demo",
			"PATCH giteaservers/demo", // the finalizer
			"PATCH giteaservers/demo/status",
			"PATCH jobs/demo-migrate-1-27-3",
			"PATCH persistentvolumeclaims/demo-data",
			"PATCH secrets/demo-secrets",
			"PATCH services/demo-http",
			"POST controllerrevisions", // the revision that records the writes
		},
	}, {
		Name:  "a database Secret without a password holds the migration and the server",
		Live:  []client.Object{database("database", "host", "port", "user")},
		Owner: owner,
		Want:  metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse},
		// Neither the migration Job nor the Deployment: both need the password.
		Writes: []string{
			"PATCH configmaps/demo-config",
			"PATCH giteaservers/demo",
			"PATCH giteaservers/demo/status",
			"PATCH persistentvolumeclaims/demo-data",
			"PATCH secrets/demo-secrets",
			"PATCH services/demo-http",
			"POST controllerrevisions", // the revision that records the writes
		},
	}}, controller.For("giteaserver", ResourceManager{}))
}
