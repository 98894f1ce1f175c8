package postgresql

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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

// TestComponent runs the PostgreSQL component under a real manager: what it writes, and when
// the PostgreSQL is Ready.
func TestComponent(t *testing.T) {
	owner := defaulted(func(pg *giteav1alpha1.PostgreSQL) { pg.Namespace, pg.UID = "", "" })
	applied := []string{
		"PATCH persistentvolumeclaims/data-demo-postgresql-0",
		"PATCH postgresqls/demo-postgresql", // the finalizer
		"PATCH postgresqls/demo-postgresql/status",
		"PATCH secrets/demo-postgresql-credentials",
		"PATCH services/demo-postgresql",
		"PATCH statefulsets/demo-postgresql",
		"POST controllerrevisions", // the revision that records the writes
	}
	controllertest.RunCases(t, api, []controllertest.Case{{
		Name:   "ready once the StatefulSet is available",
		Owner:  owner,
		Ready:  []client.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "demo-postgresql"}}},
		Want:   metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonReady},
		Writes: applied,
	}, {
		Name:   "waiting while the StatefulSet is not available",
		Owner:  owner,
		Want:   metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: kdagv1alpha1.ReasonWaiting},
		Writes: applied,
	}}, controller.For("postgresql", ResourceManager{}))
}
