package gitea

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/internal/operatortest"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
)

// api is the package's API server with the reference operator's CRDs, started by the first test
// that needs it (the golden-plan tests need none).
var api = operatortest.APIServer(scheme)

func TestMain(m *testing.M) { api.Main(m) }

// TestComponent runs the whole reference operator (the Gitea component and the three it
// creates children for) under a real manager: a Gitea is Ready once its children are, and a
// child is Ready once its workloads are.
func TestComponent(t *testing.T) {
	components := []controller.Component{
		controller.For("gitea", ResourceManager{}, ChildReadiness()),
		controller.For("postgresql", postgresql.ResourceManager{}),
		controller.For("valkey", valkey.ResourceManager{}),
		controller.For("giteaserver", giteaserver.ResourceManager{}),
	}
	owner := defaulted(func(g *giteav1alpha1.Gitea) { g.Namespace, g.UID = "", "" })
	controllertest.RunCases(t, api, []controllertest.Case{{
		Name:  "ready once every component is",
		Owner: owner,
		Ready: []client.Object{
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "demo-postgresql"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey"}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "demo-data"}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "demo-migrate-1-27-3"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		},
		Want: metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: kdagv1alpha1.ReasonReady},
	}, {
		Name:  "waiting for the database while its StatefulSet is not available",
		Owner: owner,
		Want:  metav1.Condition{Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: kdagv1alpha1.ReasonWaiting},
	}}, components...)
}

// TestComponent_DriftPolicyReachesChildren: a platform team annotates the Gitea it applied
// kdag.dev/drift: report, and the policy reaches the objects of every child owner (each child CR
// carries the annotation, which its own reconcile applies to its objects), so that a `kubectl
// scale` of the server is reported, not reverted.
func TestComponent_DriftPolicyReachesChildren(t *testing.T) {
	h := controllertest.Start(t, api,
		controller.For("gitea", ResourceManager{}, ChildReadiness()),
		controller.For("postgresql", postgresql.ResourceManager{}),
		controller.For("valkey", valkey.ResourceManager{}),
		controller.For("giteaserver", giteaserver.ResourceManager{}))
	g := defaulted(func(g *giteav1alpha1.Gitea) {
		g.Namespace, g.UID = "", ""
		g.Annotations = map[string]string{kdagv1alpha1.AnnotationDrift: kdagv1alpha1.DriftReport}
	})
	h.Create(g)
	// The server comes once the database and the cache are Ready.
	for _, ready := range []client.Object{
		controllertest.Named[corev1.PersistentVolumeClaim](postgresql.DataClaimName("demo-postgresql")),
		controllertest.Named[appsv1.StatefulSet]("demo-postgresql"),
		controllertest.Named[appsv1.Deployment]("demo-valkey"),
	} {
		h.MarkReady(ready)
	}
	for _, child := range []client.Object{
		controllertest.Named[giteav1alpha1.PostgreSQL]("demo-postgresql"),
		controllertest.Named[giteav1alpha1.Valkey]("demo-valkey"),
		controllertest.Named[giteav1alpha1.GiteaServer]("demo"),
	} {
		h.Eventually(child.GetName()+" carries kdag.dev/drift: report", func(context.Context) (bool, error) {
			return h.Get(child) && child.GetAnnotations()[kdagv1alpha1.AnnotationDrift] == kdagv1alpha1.DriftReport, nil
		})
	}
}
