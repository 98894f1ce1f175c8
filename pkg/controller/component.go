package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller/internal/intern"
	"github.com/kdag-dev/kdag/pkg/controller/internal/reconciler"
	"github.com/kdag-dev/kdag/pkg/internal/graphplan"
	"github.com/kdag-dev/kdag/pkg/rbac"
)

// Component is one kind an operator reconciles: a reconciler's name, its ResourceManager and its
// options. For makes one; Setup registers a list of them with a manager, CacheOptions sets the
// manager's cache up for them, and Plan renders an owner's graph without a cluster.
type Component struct {
	name string
	m    reconciler.Manager
	opts []Options
}

// For returns the Component named name (the reconciler's name: the field manager kdag-<name>,
// the kdag.dev/controller label, the metrics' controller label) for rm, with options that apply
// to this reconciler after Setup's own.
func For[T client.Object](name string, rm ResourceManager[T], opts ...Options) Component {
	m, err := adapt(rm)
	if err != nil {
		m = brokenManager{err: err}
	}
	return Component{name: name, m: m, opts: opts}
}

// registerFor registers the reconciler named name for rm with mgr (register, with the owner type
// inferred); Setup is the public way, which checks RBAC first.
func registerFor[T client.Object](mgr ctrl.Manager, name string, rm ResourceManager[T], opts ...Options) (*reconciler.Reconciler, error) {
	m, err := adapt(rm)
	if err != nil {
		return nil, errors.Wrapf(err, "controller %s", name)
	}
	return register(mgr, name, m, opts...)
}

// register creates the reconciler named name for m with opts merged and registers it with mgr
// (reconciler.Register). It returns an error when name is empty, when m's owner type cannot be
// used (For's), when m declares no owned type, or when a type is not in the manager's scheme:
// setup mistakes that should stop the process at start.
func register(mgr ctrl.Manager, name string, m reconciler.Manager, opts ...Options) (*reconciler.Reconciler, error) {
	if b, ok := m.(brokenManager); ok && name != "" {
		return nil, errors.Wrapf(b.err, "controller %s", name)
	}
	return reconciler.Register(mgr, name, m, mergeOptions(opts...).config())
}

// With returns a copy of c with opts after c's own options: a setting of opts wins over c's. An
// operator's command line (package operator's --NAME-concurrency) uses it.
func (c Component) With(opts ...Options) Component {
	c.opts = append(append([]Options(nil), c.opts...), opts...)
	return c
}

// Name returns the component's name.
func (c Component) Name() string { return c.name }

// NewOwner returns a new, empty owner of the component's type (a *v1alpha1.Valkey).
func (c Component) NewOwner() client.Object { return c.m.NewOwner() }

// OwnedTypes returns the types the component's ResourceManager declares (OwnedTypes): the
// kinds whose objects carry its owners' labels, which the live plan lists to find what a
// reconcile would prune.
func (c Component) OwnedTypes() []client.Object { return c.m.OwnedTypes() }

// FieldManager returns the server-side apply field manager of the component's Controller:
// "kdag-" and its name, or what an Options.FieldManager among the component's own options (For's)
// sets. An Options.FieldManager given to Setup for every component is not seen here.
func (c Component) FieldManager() string {
	o := mergeOptions(c.opts...).config()
	o.Defaults(c.name)
	return o.FieldManager
}

// Plan builds owner's graph, as NewPlan does, for an owner of the component's type; it returns an
// error when owner is of another type.
func (c Component) Plan(ctx context.Context, owner client.Object, scheme *runtime.Scheme, mapper meta.RESTMapper) (*graphplan.Plan, error) {
	if want := c.m.NewOwner(); fmt.Sprintf("%T", want) != fmt.Sprintf("%T", owner) {
		return nil, errors.Errorf("component %s reconciles %T, not %T", c.name, want, owner)
	}
	return reconciler.Plan(ctx, c.m, owner, scheme, mapper)
}

// Setup registers a reconciler per component with mgr, with opts before each component's own,
// then checks the manager's RBAC: a SelfSubjectAccessReview per verb kdag needs on each owner type
// and owned type (in each namespace of Options.WatchNamespaces, else cluster-wide). It runs here,
// before mgr.Start, because a manager that may not list a type it caches never starts: its cache
// waits for ever and no runnable would get to report why. The rules checked are Component.Rules'
// (package rbac). It returns the first setup mistake (a type not in the scheme, a component
// without owned types, two components of one name), an error naming every missing rule as a
// +kubebuilder:rbac marker to add to the manager's role (with namespace= for each namespace of
// Options.WatchNamespaces), or the error of an access review the API server did not answer; ctx
// bounds the reviews.
func Setup(ctx context.Context, mgr ctrl.Manager, components []Component, opts ...Options) error {
	seen := map[string]bool{}
	var needs []access
	for _, comp := range components {
		if seen[comp.name] {
			return errors.Errorf("controller.Setup: two components named %s", comp.name)
		}
		seen[comp.name] = true
		needs = append(needs, accessNeeded(comp.m, mgr.GetScheme(), mgr.GetRESTMapper())...)
	}
	o := mergeOptions(opts...)
	check := rbacCheck{client: mgr.GetClient(), needs: needs, namespaces: o.WatchNamespaces}
	missing, err := check.missing(ctx)
	if err != nil {
		return errors.Wrap(err, "controller.Setup: check the manager's RBAC")
	}
	if len(missing) > 0 {
		return errors.Errorf("controller.Setup: the manager's RBAC lacks what its controllers need; add these rules "+
			"to its role (as controller-gen markers; operator.Rules lists every rule an operator needs): %s", missingMessage(missing))
	}
	// Controllers last: their informers would outlive a refused Setup. They share what this
	// process deleted: a parent's prune of a child owner reaches the child's reconciler first.
	shared := Options{deletions: reconciler.NewDeletions()}
	for _, comp := range components {
		if _, err := register(mgr, comp.name, comp.m, append(append([]Options{shared}, opts...), comp.opts...)...); err != nil {
			return err
		}
	}
	return nil
}

// CacheOptions returns the manager cache options for components: for each type they own and none
// of them reconciles, the cache keeps only the objects a kdag controller applied (those with
// kdagv1alpha1.LabelController), so its memory follows what kdag owns rather than the cluster's
// size. A type one component owns and another reconciles (a child custom resource) is cached
// whole: its controller must see every object of its type. Every owner type and owned type has
// an entry in ByObject (the owner types with labels.Everything()), so that a layer can narrow
// them all (package shard adds its shard's label requirement to each). Set DefaultNamespaces and
// the rest on the result as needed; with DefaultNamespaces, also set ctrl.Options.MapperProvider
// to MapperProvider, or every cached read pays a walk of the API groups. A component whose types
// are not in scheme is left out (Setup reports it). The owners' revisions (ControllerRevisions
// kdag records, revision.go) have an entry too: kdag's only, cached without their data. Every
// entry's transform makes the cached objects share the metadata they repeat (label maps, annotation
// keys, the owner reference, managed fields: package internal/intern, one intern.Interner for
// all entries), which changes no value; a caller
// that sets its own Transform on an entry replaces it.
func CacheOptions(scheme *runtime.Scheme, components ...Component) cache.Options {
	kdags, err := labels.NewRequirement(kdagv1alpha1.LabelController, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	owners := map[schema.GroupKind]bool{}
	for _, comp := range components {
		if gvk, err := reconciler.GVKOf(comp.m.NewOwner(), scheme); err == nil {
			owners[gvk.GroupKind()] = true
		}
	}
	byObject := map[client.Object]cache.ByObject{}
	added := map[schema.GroupKind]bool{}
	shared := intern.New()
	for _, comp := range components {
		if gvk, err := reconciler.GVKOf(comp.m.NewOwner(), scheme); err == nil && !added[gvk.GroupKind()] {
			added[gvk.GroupKind()] = true
			byObject[comp.m.NewOwner()] = cache.ByObject{Label: labels.Everything(), Transform: shared.Metadata}
		}
		for _, obj := range comp.m.OwnedTypes() {
			gvk, err := reconciler.GVKOf(obj, scheme)
			if err != nil || added[gvk.GroupKind()] {
				continue
			}
			added[gvk.GroupKind()] = true
			if owners[gvk.GroupKind()] {
				byObject[obj] = cache.ByObject{Label: labels.Everything(), Transform: shared.Metadata}
			} else {
				byObject[obj] = cache.ByObject{Label: labels.NewSelector().Add(*kdags), Transform: shared.Metadata}
			}
		}
	}
	if _, owned := added[schema.GroupKind{Group: "apps", Kind: "ControllerRevision"}]; !owned && len(components) > 0 {
		// The owners' revisions (revision.go): kdag's only, without their data and managed fields
		// (the reconciler needs their numbers). They carry no shard label (an owner's history
		// stays whole when it moves), so a shard layer leaves them unnarrowed.
		byObject[&appsv1.ControllerRevision{}] = cache.ByObject{Label: labels.NewSelector().Add(*kdags),
			Transform: stripRevisionData(shared)}
	}
	return cache.Options{ByObject: byObject}
}

// stripRevisionData returns the cache transform of kdag's ControllerRevisions: their data (the
// recorded spec and changes, the bulk of each) and managed fields go, the rest stays, its
// repeated metadata shared by shared. A non-revision passes unchanged.
func stripRevisionData(shared *intern.Interner) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if cr, ok := in.(*appsv1.ControllerRevision); ok {
			cr.Data = runtime.RawExtension{}
			cr.ManagedFields = nil
			shared.ObjectMeta(&cr.ObjectMeta)
		}
		return in, nil
	}
}

// access is one permission a reconciler needs: verb on a resource (and subresource) of group.
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

// rule returns a as an RBAC rule.
func (a access) rule() rbacv1.PolicyRule {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	return rbacv1.PolicyRule{APIGroups: []string{a.group}, Resources: []string{r}, Verbs: []string{a.verb}}
}

// Rules returns the RBAC rules the component's reconciler needs (package rbac): on its owner
// type (rbac.Owner), on each type of OwnedTypes (rbac.Owned; with PersistentVolumeClaims,
// rbac.StorageClasses), and kdag's own (rbac.Kdag), merged (rbac.Merge). scheme and mapper
// name the types' groups and resources. It returns an error naming the first type that scheme or
// mapper does not know, with the rules of the others.
func (c Component) Rules(scheme *runtime.Scheme, mapper meta.RESTMapper) ([]rbacv1.PolicyRule, error) {
	rules, err := rulesNeeded(c.m, scheme, mapper)
	if err != nil {
		err = errors.Wrapf(err, "component %s", c.name)
	}
	return rbac.Merge(rules), err
}

// rulesNeeded returns the rules a reconciler of m needs (Component.Rules), and the error of the
// first type the scheme or mapper does not know, which it leaves out.
func rulesNeeded(m reconciler.Manager, scheme *runtime.Scheme, mapper meta.RESTMapper) ([]rbacv1.PolicyRule, error) {
	var firstErr error
	resourceOf := func(obj client.Object) (schema.GroupResource, bool) {
		if obj == nil {
			return schema.GroupResource{}, false
		}
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			firstErr = cmpErr(firstErr, errors.Wrapf(err, "type %T is not in the scheme", obj))
			return schema.GroupResource{}, false
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			firstErr = cmpErr(firstErr, errors.Wrapf(err, "no resource for %s (is its CRD installed?)", gvk))
			return schema.GroupResource{}, false
		}
		return mapping.Resource.GroupResource(), true
	}
	rules := rbac.Kdag()
	if gr, ok := resourceOf(m.NewOwner()); ok {
		rules = append(rules, rbac.Owner(gr)...)
	}
	for _, obj := range m.OwnedTypes() {
		if gr, ok := resourceOf(obj); ok {
			rules = append(rules, rbac.Owned(gr)...)
		}
		if _, claim := obj.(*corev1.PersistentVolumeClaim); claim {
			rules = append(rules, rbac.StorageClasses()...)
		}
	}
	if b, ok := m.(brokenManager); ok {
		firstErr = cmpErr(firstErr, b.err)
	}
	return rules, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// accessNeeded returns the API accesses a reconciler of m needs (rulesNeeded, one verb each). A
// type the scheme or mapper does not know is left out: registering the reconciler reports it
// more clearly.
func accessNeeded(m reconciler.Manager, scheme *runtime.Scheme, mapper meta.RESTMapper) []access {
	rules, _ := rulesNeeded(m, scheme, mapper)
	var out []access
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					out = append(out, access{group: g, resource: resource, subresource: sub, verb: v})
				}
			}
		}
	}
	return out
}

// rbacCheck asks the API server whether the manager may do what its Controllers need (Setup).
// client only creates SelfSubjectAccessReviews: writes need no started cache.
type rbacCheck struct {
	client client.Client
	needs  []access
	// namespaces are where to ask (Options.WatchNamespaces); none: cluster-wide.
	namespaces []string
}

// missing returns the needed accesses the API server denies, as merged rules (rbac.Merge) by
// namespace ("" cluster-wide).
func (r rbacCheck) missing(ctx context.Context) (map[string][]rbacv1.PolicyRule, error) {
	namespaces := r.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""} // all namespaces
	}
	seen := map[access]bool{}
	missing := map[string][]rbacv1.PolicyRule{}
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
				missing[ns] = append(missing[ns], a.rule())
			}
		}
	}
	for ns, rules := range missing {
		missing[ns] = rbac.Merge(rules)
	}
	return missing, nil
}

// missingMessage says which rules to add: controller-gen markers, a Role's per namespace.
func missingMessage(missing map[string][]rbacv1.PolicyRule) string {
	namespaces := make([]string, 0, len(missing))
	for ns := range missing {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	var lines []string
	for _, ns := range namespaces {
		lines = append(lines, rbac.Markers(ns, missing[ns])...)
	}
	return strings.Join(lines, "; ")
}

// brokenManager is the reconciler.Manager of a ResourceManager whose owner type cannot be used:
// every registration fails with err.
type brokenManager struct{ err error }

func (b brokenManager) NewOwner() client.Object     { return nil }
func (b brokenManager) OwnedTypes() []client.Object { return nil }
func (b brokenManager) AddResources(context.Context, client.Object, *reconciler.Builder) error {
	return b.err
}
func (b brokenManager) Validate(context.Context, client.Object) (bool, error) { return false, b.err }
func (b brokenManager) Cleanup(context.Context, client.Object) (bool, error)  { return false, b.err }
func (b brokenManager) IsReporter() bool                                      { return false }
func (b brokenManager) ReportStatus(context.Context, client.Object, reconciler.Report) (bool, error) {
	return false, b.err
}
func (b brokenManager) IsCleaner() bool { return false }
