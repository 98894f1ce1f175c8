package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/internal/graphplan"
)

// testPlan is plan.NewPlan for this package's own tests, which cannot import pkg/plan (it
// imports this package).
func testPlan[T client.Object](ctx context.Context, rm ResourceManager[T], owner T, scheme *runtime.Scheme, mapper meta.RESTMapper) (*graphplan.Plan, error) {
	return For("plan", rm).Plan(ctx, owner, scheme, mapper)
}
