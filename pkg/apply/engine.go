package apply

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/resources/schemas"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// Action is what the engine did to an object. It reads well in logs, events and span attributes.
type Action string

// Actions.
const (
	// Created: the object did not exist and was created.
	Created Action = "created"
	// Applied: the object was applied because its desired state changed, it drifted, or its
	// labels were put back.
	Applied Action = "applied"
	// Skipped: the live object already matched; no write.
	Skipped Action = "skipped"
	// Adopted: an existing object that was not the owner's was taken over.
	Adopted Action = "adopted"
	// Refused: an existing object that is not the owner's was left alone.
	Refused Action = "refused"
	// Held: another writer keeps changing fields kdag owns and kdag paused reverting them.
	Held Action = "held"
	// Pruned: deleted, as the graph no longer holds it.
	Pruned Action = "pruned"
	// Deleted: deleted during the owner's teardown.
	Deleted Action = "deleted"
	// Orphaned: a kept object released instead of deleted.
	Orphaned Action = "orphaned"
	// Recreating: an immutable field refused the update and the Recreate policy deleted the
	// object, to be created again once it is gone (Change.Object is nil).
	Recreating Action = "recreating"
	// Reported: another writer changed fields kdag set, and the drift policy is DriftReport: the
	// object was left as it is, its drifted fields are in Change.Drifted.
	Reported Action = "reported"
)

// DriftPolicy is what Apply does with fields kdag set that another writer changed, when the
// desired object is unchanged. A change of the desired object (its desired hash) is
// applied under either policy.
type DriftPolicy string

// Drift policies; the zero value is DriftRepair.
const (
	// DriftRepair reverts the other writer's changes with a forced apply (subject to the drift
	// budget, Options.DriftRepairLimit): the default, and kdag's only behaviour before drift
	// policies existed.
	DriftRepair DriftPolicy = kdagv1alpha1.DriftRepair
	// DriftReport leaves the object as the other writer set it and returns a Change with action
	// Reported naming the drifted fields; nothing is written. A change of the desired object is
	// still applied, as a whole: that apply reverts the drift present at that moment too, and
	// Change.Drifted names those fields as repaired.
	DriftReport DriftPolicy = kdagv1alpha1.DriftReport
)

// Validate returns nil for DriftRepair and DriftReport, else an error naming the accepted values.
func (p DriftPolicy) Validate() error {
	_, err := ParseDriftPolicy(string(p))
	return err
}

// driftFor is the drift policy under which a node of owner with policy p is applied: the owner's
// kdag.dev/drift annotation when set to a valid value (it wins over the node's OnDrift, so that a
// platform team decides for the CR it applied), else p, else DriftRepair.
func driftFor(owner client.Object, p DriftPolicy) DriftPolicy {
	if v, ok := owner.GetAnnotations()[kdagv1alpha1.AnnotationDrift]; ok {
		if d, err := ParseDriftPolicy(v); err == nil {
			return d
		}
	}
	if p != "" {
		return p
	}
	return DriftRepair
}

// CheckOwner returns an error when owner's kdag.dev/drift annotation is set to an unknown value,
// naming the annotation and the accepted values: only a change of the owner can help (the caller
// Stalls it), so it is checked before the graph runs.
func CheckOwner(owner client.Object) error {
	v, ok := owner.GetAnnotations()[kdagv1alpha1.AnnotationDrift]
	if !ok {
		return nil
	}
	_, err := ParseDriftPolicy(v)
	return errors.Wrapf(err, "annotation %s", kdagv1alpha1.AnnotationDrift)
}

// ParseDriftPolicy returns the DriftPolicy named s ("repair" or "report", the values of the
// kdag.dev/drift annotation), or an error naming the accepted values.
func ParseDriftPolicy(s string) (DriftPolicy, error) {
	switch p := DriftPolicy(s); p {
	case DriftRepair, DriftReport:
		return p, nil
	}
	return "", errors.Errorf("unknown drift policy %q: use %q or %q", s, DriftRepair, DriftReport)
}

// Options configure an Engine. Every field states its default.
type Options struct {
	// FieldManager is the server-side apply field manager of every write. Required.
	FieldManager string
	// DriftRepairLimit is how many times the engine reverts other writers' changes to one object
	// within DriftRepairWindow. The next change starts a pause: the object is left as the other
	// writer set it and Apply returns a *DriftConflictError until the pause ends. Then one repair
	// is tried; another change within DriftRepairWindow starts the next pause, twice as long. An
	// object that stays as kdag left it for DriftRepairWindow starts over. Default: 5. Negative:
	// no limit.
	DriftRepairLimit int
	// DriftRepairWindow is the time DriftRepairLimit counts repairs in. Default: 1 minute.
	DriftRepairWindow time.Duration
	// DriftBackoff is the length of the first pause. Default: 30 seconds.
	DriftBackoff time.Duration
	// DriftBackoffMax caps the pauses. Default: 10 minutes.
	DriftBackoffMax time.Duration
	// RecreateSettle is how long an object deleted to be re-created (Policy.Recreate) must have
	// been gone before the engine creates it again: the old object's controller may still write
	// its status, onto a new object of the same name (see recreations). Default: 3 seconds.
	RecreateSettle time.Duration
}

func (o *Options) defaults() {
	if o.DriftRepairLimit == 0 {
		o.DriftRepairLimit = 5
	}
	if o.DriftRepairWindow <= 0 {
		o.DriftRepairWindow = time.Minute
	}
	if o.DriftBackoff <= 0 {
		o.DriftBackoff = 30 * time.Second
	}
	if o.DriftBackoffMax <= 0 {
		o.DriftBackoffMax = 10 * time.Minute
	}
	if o.RecreateSettle <= 0 {
		o.RecreateSettle = 3 * time.Second
	}
	o.DriftBackoffMax = max(o.DriftBackoffMax, o.DriftBackoff)
}

// Engine applies objects with one field manager. It is safe for concurrent use; it remembers,
// per object UID, the resourceVersion at which it last found the object as wanted and the
// fingerprint of its Apply entry then (so that an unchanged object costs no drift computation,
// and one changed only by others no schema) and its drift repairs (the budget). Call Forget
// when an object is deleted.
type Engine struct {
	client  client.Client // writes
	reader  client.Reader // uncached reads, on collisions only
	schemas *schemas.Provider
	opts    Options
	drift   *driftBudget
	// verified: what the engine last found as it wants it, per object UID
	verified verifiedSet
	// reported: types.UID -> reportedAt, the drift last reported of an object (DriftReport)
	reported sync.Map
	// recreated: the objects deleted to be re-created, until they are created again
	recreated recreations
}

// New returns an Engine that writes with c, reads existing objects it collides with through
// reader (uncached: the caller's cache holds only kdag's objects), and types objects for the
// missing-field check with schemas' converters. It returns an error when opts.FieldManager is
// empty.
func New(c client.Client, reader client.Reader, schemas *schemas.Provider, opts Options) (*Engine, error) {
	if opts.FieldManager == "" {
		return nil, errors.New("apply.New: empty field manager")
	}
	opts.defaults()
	return &Engine{client: c, reader: reader, schemas: schemas, opts: opts, drift: newDriftBudget(opts, clock.RealClock{})}, nil
}

// FieldManager returns the engine's field manager.
func (e *Engine) FieldManager() string { return e.opts.FieldManager }

// Owner is whom objects are applied for: its UID decides ownership, its kind and name make the
// kdag.dev/adopt value that names it.
type Owner struct {
	// Object is the owner.
	Object client.Object
	// Kind is the owner's kind.
	Kind string
	// Controller is the kdag controller's name, the value of kdag.dev/controller.
	Controller string
}

// AdoptValue is the kdag.dev/adopt value that names o on an object in namespace: "Kind/name" in
// o's namespace, "Kind/namespace/name" elsewhere.
func (o Owner) AdoptValue(namespace string) string {
	if o.Object.GetNamespace() == namespace {
		return o.Kind + "/" + o.Object.GetName()
	}
	return o.Kind + "/" + o.Object.GetNamespace() + "/" + o.Object.GetName()
}

// Policy is how a node's object may be written: the node's complete policy, one value. Which
// option wins where two meet is the decision table in docs/design.md ("Node lifecycle").
type Policy struct {
	// CreateOnly: created once, never written again but to take or restore ownership (a
	// generated password).
	CreateOnly bool
	// Adopt: an existing object that is not the owner's is taken over.
	Adopt bool
	// Keep: the deletion policy keep. The object carries kdag.dev/resource-policy: keep and no
	// controller owner reference, is orphaned rather than deleted by prune and teardown, and is
	// never deleted by Recreate.
	Keep bool
	// Finished: once its object is gone, the node is done and nothing is created (a Job that
	// ran to completion and was cleaned up).
	Finished bool
	// Recreate, when not nil, is the deletion propagation with which an object whose update an
	// immutable field refuses is deleted, to be created again as desired once it is gone
	// (Change.Action Recreating). Nil: such an update fails with an *ImmutableFieldError.
	Recreate *metav1.DeletionPropagation
	// Drift: what to do with other writers' changes to fields kdag set. Default DriftRepair.
	Drift DriftPolicy
	// Ignore are fields sent when the object is created and left out of every later apply
	// (a Deployment's spec.replicas that an autoscaler owns): kdag's field manager releases them,
	// they are never drift, and a write never resets them. So that leaving them out does not
	// delete them, Apply first hands the ones kdag's Apply entry still holds to the
	// field manager ReleasedFieldManager, with their live values.
	Ignore []FieldPath
}

// Change is what Apply did.
type Change struct {
	// Action is what happened.
	Action Action
	// Object is the object as the API server holds it afterwards: the response to the write (an
	// *unstructured.Unstructured), or the live object Apply was given when nothing was written
	// (not copied: read it, never change it). Nil when the object was refused or held, or the
	// write failed.
	Object client.Object
	// Drifted are the fields another writer had changed, sorted: repaired by this write, or,
	// with action Reported, left as they are. Paths only, never values.
	Drifted []string
	// Repeat, with action Reported: the engine reported the same fields of this object before
	// (a reconcile that found nothing new), so that callers count and announce a drift once.
	Repeat bool
	// pending says what change waits for the cluster (Entry.Pending).
	pending string
	// existing is, from create, the owner's object that exists though the cache did not hold
	// it: to be updated as the live object.
	existing *unstructured.Unstructured
}

// Apply brings desired to the cluster. desired is prepared for server-side apply (see
// resources.Desired) and carries kdag's labels, its kdag.dev/desired-hash annotation and, where
// one can be held, the owner reference; Apply may replace its content with the API server's
// response. live is the object as the caller's cache holds it, or nil when the cache does not
// hold it.
//
// Errors name the object. A refused object gives an *AdoptionError, a held repair a
// *DriftConflictError; the API server's errors are wrapped (errors.As finds their status), with
// advice when the server's validation or admission refused the object.
func (e *Engine) Apply(ctx context.Context, owner Owner, desired *unstructured.Unstructured, live client.Object, p Policy) (Change, error) {
	if live == nil {
		c, err := e.create(ctx, owner, desired, p)
		if err != nil || c.existing == nil {
			return c, err
		}
		live = c.existing
	}
	return e.update(ctx, owner, desired, live, p)
}

// Forget drops what the engine remembers about the object uid (it was deleted).
func (e *Engine) Forget(uid types.UID) {
	e.verified.delete(uid)
	e.reported.Delete(uid)
	e.drift.forget(uid)
}

// describe names u in errors: "Kind namespace/name", or "Kind name".
func describe(u metav1.Object, gvk schema.GroupVersionKind) string {
	if u.GetNamespace() == "" {
		return gvk.Kind + " " + u.GetName()
	}
	return gvk.Kind + " " + u.GetNamespace() + "/" + u.GetName()
}

// absentResourceVersion is the resourceVersion createIfAbsent applies with. An apply that
// carries metadata.resourceVersion uses it as a precondition on an existing object (the API
// server answers 409 Conflict when it differs), and the server drops it when the apply creates
// the object. etcd's revision 1 is that of the empty store, before any write, so no object has
// it: the apply creates the object or fails.
const absentResourceVersion = "1"

// CreateIfAbsent applies desired like a server-side apply, but only if no object of its name
// exists: it returns a Conflict error (apierrors.IsConflict) without writing anything when one
// does, so the existence check and the create are one atomic request. On success desired holds
// the response, whose resourceVersion is the real one.
func (e *Engine) CreateIfAbsent(ctx context.Context, desired *unstructured.Unstructured) error {
	desired.SetResourceVersion(absentResourceVersion)
	err := e.apply(ctx, desired)
	if err != nil && desired.GetResourceVersion() == absentResourceVersion {
		desired.SetResourceVersion("")
	}
	return err
}

// createIfAbsent is CreateIfAbsent returning the API server's response: for a kind whose
// readiness needs no conversion (resources.TypedReady: ConfigMap, Secret, ServiceAccount, the
// RBAC kinds) a typed object decoded from the response, desired itself for any other kind. The
// request is the same conditional apply; only the response is decoded into the typed object,
// which costs about half the CPU and allocations of an unstructured one (managed fields stay
// raw JSON), and whose readiness is then judged without conversion.
func (e *Engine) createIfAbsent(ctx context.Context, desired *unstructured.Unstructured) (client.Object, error) {
	typed := e.typedResponse(desired.GroupVersionKind())
	if typed == nil {
		return desired, e.CreateIfAbsent(ctx, desired)
	}
	desired.SetResourceVersion(absentResourceVersion)
	defer desired.SetResourceVersion("")
	if err := e.applyInto(ctx, desired, typed); err != nil {
		return nil, err
	}
	return typed, nil
}

// typedResponse returns a new typed object of gvk to decode an apply's response into, or nil
// when gvk is not a kind resources.TypedReady judges or the client's scheme does not know it.
func (e *Engine) typedResponse(gvk schema.GroupVersionKind) client.Object {
	if !clientgoscheme.Scheme.Recognizes(gvk) {
		return nil
	}
	obj, err := e.client.Scheme().New(gvk)
	if err != nil {
		return nil
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil
	}
	if _, ok := resources.TypedReady(co); !ok {
		return nil
	}
	return co
}

// applyInto is apply, with the response decoded into into (a typed object of desired's kind)
// instead of desired.
func (e *Engine) applyInto(ctx context.Context, desired *unstructured.Unstructured, into client.Object) (err error) {
	ctx, span := tracing.Tracer().Start(ctx, "apply")
	defer func() { tracing.EndSpan(span, err) }()
	body, err := json.Marshal(desired.Object)
	if err != nil {
		return errors.Wrapf(err, "%s: encode", describe(desired, desired.GroupVersionKind()))
	}
	into.SetNamespace(desired.GetNamespace())
	into.SetName(desired.GetName())
	err = e.client.Patch(ctx, into, client.RawPatch(types.ApplyPatchType, body),
		client.FieldOwner(e.opts.FieldManager), client.ForceOwnership)
	if err = e.applyError(ctx, err, desired); err != nil {
		return err
	}
	e.verify(into, desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash])
	return nil
}

// applyError is applyError for desired's apply, except for a claim's growth refused by a
// StorageClass that the engine's client already sees allowing it: the change that allows it woke
// the owner before the API server's admission saw it, so a retry, not an administrator, fixes
// it, and the error is a plain one instead of a *VolumeExpansionError.
func (e *Engine) applyError(ctx context.Context, err error, desired *unstructured.Unstructured) error {
	err = applyError(err, describe(desired, desired.GroupVersionKind()))
	var expansion *VolumeExpansionError
	if errors.As(err, &expansion) && e.expansionAllowed(ctx, desired) {
		return errors.Wrapf(expansion.Err, "%s: the API server refused to grow it, but its StorageClass allows volume expansion "+
			"(a change the API server has not seen yet): kdag retries", expansion.Object)
	}
	return err
}

// expansionAllowed reports whether the StorageClass of the claim desired allows volume
// expansion as the engine's client reads it (the manager's cache, which the StorageClass's change
// reached first): its spec.storageClassName, or the live claim's when desired names none. False
// when either cannot be read.
func (e *Engine) expansionAllowed(ctx context.Context, desired *unstructured.Unstructured) bool {
	class, _, _ := unstructured.NestedString(desired.Object, "spec", "storageClassName")
	if class == "" {
		live := &corev1.PersistentVolumeClaim{}
		if err := e.client.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil || live.Spec.StorageClassName == nil {
			return false
		}
		class = *live.Spec.StorageClassName
	}
	sc := &storagev1.StorageClass{}
	if err := e.client.Get(ctx, client.ObjectKey{Name: class}, sc); err != nil {
		return false
	}
	return sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
}

// applyError says what an apply's error means for the user, nil for nil.
func applyError(err error, name string) error {
	if IsInvalid(err) {
		// Retrying cannot help: say what can.
		return errors.Wrapf(err, "%s: apply refused, change the owner's spec that produces it", name)
	}
	if VolumeExpansionForbidden(err) {
		return &VolumeExpansionError{Object: name, Err: err}
	}
	if status := apierrors.APIStatus(nil); errors.As(err, &status) && DeniedByAdmission(status.Status().Message) {
		return errors.Wrapf(err, "%s: apply denied by admission control, kdag retries: change the policy or webhook, or the owner's spec", name)
	}
	return errors.Wrapf(err, "%s: apply", name)
}

// apply server-side applies desired with the engine's field manager, forcing ownership (kdag
// only applies objects it created or was told to adopt), and leaves the response in desired.
//
// A custom resource (a child owner) gets the trace context of this call in an annotation, so its
// own controller's reconcile links to this one. The annotation is left out of the desired hash
// and set only here, on a write that happens anyway: it never causes a write.
func (e *Engine) apply(ctx context.Context, desired *unstructured.Unstructured) (err error) {
	ctx, span := tracing.Tracer().Start(ctx, "apply")
	defer func() { tracing.EndSpan(span, err) }()
	gvk := desired.GroupVersionKind()
	if !clientgoscheme.Scheme.Recognizes(gvk) {
		if tp, ok := tracing.InjectAnnotation(ctx); ok {
			setAnnotation(desired, tracing.AnnotationTraceParent, tp)
		}
	}
	err = e.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired),
		client.FieldOwner(e.opts.FieldManager), client.ForceOwnership)
	if err = e.applyError(ctx, err, desired); err != nil {
		return err
	}
	// The response is the object as kdag wants it: nothing to check until it changes.
	e.verify(desired, desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash])
	return nil
}

func setAnnotation(u *unstructured.Unstructured, key, value string) {
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	u.SetAnnotations(ann)
}
