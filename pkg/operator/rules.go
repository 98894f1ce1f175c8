package operator

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/rbac"
)

// Rules returns every RBAC rule the manager Run makes for components needs, merged one per API
// group and resource (rbac.Merge): each component's (controller.Component.Rules: its owner type,
// the types of its OwnedTypes, kdag's events and revisions) and the Leases of leader election and
// shards (rbac.Leases). scheme and mapper name the types' resources (a mapper of a cluster with
// the CRDs installed: mgr.GetRESTMapper(), envtest's). Compare them with the manager's
// ClusterRole with rbac.Missing, or print them as markers with rbac.Markers. It returns an error
// naming the first type that scheme or mapper does not know.
func Rules(scheme *runtime.Scheme, mapper meta.RESTMapper, components ...controller.Component) ([]rbacv1.PolicyRule, error) {
	all := [][]rbacv1.PolicyRule{rbac.Leases()}
	for _, c := range components {
		rules, err := c.Rules(scheme, mapper)
		if err != nil {
			return nil, err
		}
		all = append(all, rules)
	}
	return rbac.Merge(all...), nil
}

// KdagRules returns the rules kdag itself needs for owners, whatever their graphs apply: on each
// owner resource get, list, watch, update and patch, update and patch on its status, update on its
// finalizers (rbac.Owner); create and patch on events.k8s.io events and get, list, watch, create
// and delete on apps controllerrevisions (rbac.Kdag); every verb on coordination.k8s.io leases
// (rbac.Leases). Add rbac.Owned's rules for each type of OwnedTypes, or use Rules, which does.
//
// As controller-gen markers, for an owner resource "hellos" of group "example.com":
//
//	+kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=create;delete;get;list;watch
//	+kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create;delete;get;list;patch;update;watch
//	+kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//	+kubebuilder:rbac:groups=example.com,resources=hellos,verbs=get;list;patch;update;watch
//	+kubebuilder:rbac:groups=example.com,resources=hellos/finalizers,verbs=update
//	+kubebuilder:rbac:groups=example.com,resources=hellos/status,verbs=patch;update
func KdagRules(owners ...schema.GroupResource) []rbacv1.PolicyRule {
	all := [][]rbacv1.PolicyRule{rbac.Kdag(), rbac.Leases()}
	for _, o := range owners {
		all = append(all, rbac.Owner(o))
	}
	return rbac.Merge(all...)
}
