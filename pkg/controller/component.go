package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pkg/errors"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Component is one kind an operator reconciles: a Controller's name, its ResourceManager and its
// options. For makes one; Setup registers a list of them with a manager, CacheOptions sets the
// manager's cache up for them, and Plan renders an owner's graph without a cluster.
type Component struct {
	name string
	m    manager
	opts []Option
}

// For returns the Component named name (the Controller's name: the field manager kdag-<name>,
// the kdag.dev/controller label, the metrics' controller label) for rm, with options that apply
// to this Controller after Setup's own.
func For[T client.Object](name string, rm ResourceManager[T], opts ...Option) Component {
	m, err := adapt(rm)
	if err != nil {
		m = brokenManager{err: err}
	}
	return Component{name: name, m: m, opts: opts}
}

// Name returns the component's name.
func (c Component) Name() string { return c.name }

// NewOwner returns a new, empty owner of the component's type (a *v1alpha1.Valkey).
func (c Component) NewOwner() client.Object { return c.m.newOwner() }

// Plan builds owner's graph, as NewPlan does, for an owner of the component's type; it returns an
// error when owner is of another type.
func (c Component) Plan(ctx context.Context, owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper) (*Plan, error) {
	if want := c.m.newOwner(); fmt.Sprintf("%T", want) != fmt.Sprintf("%T", owner) {
		return nil, errors.Errorf("component %s reconciles %T, not %T", c.name, want, owner)
	}
	return newPlan(ctx, c.m, owner, scheme, mapper)
}

// Setup registers a Controller per component with mgr, with opts before each component's own,
// and a check that runs when the manager starts: a SelfSubjectAccessReview per verb kdag needs on
// each owner type and owned type, which stops the manager with every missing RBAC rule listed
// (kdag's RBAC markers and the chart's role must grant them). It returns the first setup mistake
// (a type not in the scheme, a component without owned types, two components of one name).
func Setup(mgr ctrl.Manager, components []Component, opts ...Option) error {
	seen := map[string]bool{}
	var needs []access
	for _, comp := range components {
		if seen[comp.name] {
			return errors.Errorf("controller.Setup: two components named %s", comp.name)
		}
		seen[comp.name] = true
		c, err := register(mgr, comp.name, comp.m, append(append([]Option(nil), opts...), comp.opts...)...)
		if err != nil {
			return err
		}
		needs = append(needs, c.accessNeeded()...)
	}
	var o options
	for _, opt := range opts {
		opt.applyTo(&o)
	}
	check := rbacCheck{client: mgr.GetClient(), needs: needs, namespaces: o.WatchNamespaces}
	return errors.Wrap(mgr.Add(check), "controller.Setup: add the RBAC check")
}

// CacheOptions returns the manager cache options for components: for each type they own and none
// of them reconciles, the cache keeps only the objects a kdag controller applied (those with
// kdagv1alpha1.LabelController), so its memory follows what kdag owns rather than the cluster's
// size. A type one component owns and another reconciles (a child custom resource) is cached
// whole: its controller must see every object of its type. Set DefaultNamespaces and the rest on
// the result as needed. A component whose types are not in scheme is left out (Setup reports it).
func CacheOptions(scheme *runtime.Scheme, components ...Component) cache.Options {
	req, err := labels.NewRequirement(kdagv1alpha1.LabelController, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	sel := labels.NewSelector().Add(*req)
	owners := map[schema.GroupKind]bool{}
	for _, comp := range components {
		if gvk, err := gvkOf(comp.m.newOwner(), scheme); err == nil {
			owners[gvk.GroupKind()] = true
		}
	}
	byObject := map[client.Object]cache.ByObject{}
	added := map[schema.GroupKind]bool{}
	for _, comp := range components {
		for _, obj := range comp.m.ownedTypes() {
			gvk, err := gvkOf(obj, scheme)
			if err != nil || owners[gvk.GroupKind()] || added[gvk.GroupKind()] {
				continue
			}
			added[gvk.GroupKind()] = true
			byObject[obj] = cache.ByObject{Label: sel}
		}
	}
	return cache.Options{ByObject: byObject}
}

// access is one permission a Controller needs: verb on a resource (and subresource) of group.
type access struct {
	group, resource, subresource, verb string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	return r + ": " + a.verb
}

// accessNeeded lists what the Controller does with its owner type and owned types, and its
// events. Namespaces and referenced kinds are left out: the Controller copes without them.
func (c *Controller) accessNeeded() []access {
	var out []access
	add := func(gvk schema.GroupVersionKind, sub string, verbs ...string) {
		mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return // an unknown kind fails the Controller's own watches with a clearer message
		}
		for _, v := range verbs {
			out = append(out, access{group: gvk.Group, resource: mapping.Resource.Resource, subresource: sub, verb: v})
		}
	}
	add(c.ownerGVK, "", "get", "list", "watch", "update", "patch")
	add(c.ownerGVK, "status", "update", "patch")
	add(c.ownerGVK, "finalizers", "update")
	for _, t := range c.owned {
		add(t.gvk, "", "get", "list", "watch", "create", "update", "patch", "delete")
	}
	// The Controller's events (mgr.GetEventRecorder: the events.k8s.io API); without them the
	// user loses the Warning events that say what failed.
	for _, v := range []string{"create", "patch"} {
		out = append(out, access{group: "events.k8s.io", resource: "events", verb: v})
	}
	return out
}

// rbacCheck is the Runnable Setup adds: when the manager starts, it asks the API server whether
// the manager may do what its Controllers need, and fails the start with every rule missing.
type rbacCheck struct {
	client client.Client
	needs  []access
	// namespaces are where to ask (WithWatchNamespaces); none: cluster-wide.
	namespaces []string
}

// Start implements manager.Runnable.
func (r rbacCheck) Start(ctx context.Context) error {
	missing, err := r.missing(ctx)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return errors.Errorf("the manager's RBAC lacks what its controllers need; grant it (kdag's +kubebuilder:rbac markers, "+
			"the chart's role): %s", strings.Join(missing, "; "))
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica checks.
func (r rbacCheck) NeedLeaderElection() bool { return false }

// missing returns the needed accesses the API server denies, sorted and without duplicates.
func (r rbacCheck) missing(ctx context.Context) ([]string, error) {
	namespaces := r.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""} // all namespaces
	}
	seen := map[access]bool{}
	var missing []string
	for _, a := range r.needs {
		if seen[a] {
			continue
		}
		seen[a] = true
		for _, ns := range namespaces {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb,
				},
			}}
			if err := r.client.Create(ctx, review); err != nil {
				return nil, errors.Wrapf(err, "ask whether the manager may %s", a)
			}
			if !review.Status.Allowed {
				where := ""
				if ns != "" {
					where = " in namespace " + ns
				}
				missing = append(missing, a.String()+where)
			}
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// brokenManager is the manager of a ResourceManager whose owner type cannot be used: every
// registration fails with err.
type brokenManager struct{ err error }

func (b brokenManager) newOwner() client.Object     { return nil }
func (b brokenManager) ownedTypes() []client.Object { return nil }
func (b brokenManager) addResources(context.Context, client.Object, *Builder) error {
	return b.err
}
func (b brokenManager) validate(context.Context, client.Object) (bool, error) { return false, b.err }
func (b brokenManager) cleanup(context.Context, client.Object) (bool, error)  { return false, b.err }
func (b brokenManager) isReporter() bool                                      { return false }
func (b brokenManager) reportStatus(context.Context, client.Object, Report) (bool, error) {
	return false, b.err
}
func (b brokenManager) isCleaner() bool { return false }
