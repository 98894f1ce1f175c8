package controller

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// processNode brings one node's object to its desired state and checks its readiness. It
// returns nil when the object is ready, a *waitingError when it is applied but not ready, and
// an error naming the object otherwise.
func (c *Controller) processNode(ctx context.Context, owner client.Object, s *nodeSpec, results []nodeResult, i int) error {
	res := &results[i]
	if s.reference {
		return c.refs.check(ctx, s, res)
	}
	if c.namespaceTerminating(s.id.Namespace) {
		return errNamespaceTerminating(s.id)
	}
	desired, err := c.desired(ctx, owner, s, results)
	if err != nil {
		return err
	}
	// What dependents consume of a node kdag renders is the desired object as rendered, hashed
	// before the apply replaces it with the API server's response (which adds defaults): the
	// same hash whether the object was just created or read from the cache (issue 20, item 6).
	if !s.createOnly {
		if res.contentHash, err = resources.ContentHash(desired); err != nil {
			return errors.Wrapf(err, "%s: hash content", s.id)
		}
	}

	live, err := c.newObject(s)
	if err != nil {
		return err
	}
	switch err := c.client.Get(ctx, client.ObjectKeyFromObject(desired), live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return errors.Wrapf(err, "%s: read from cache", s.id)
	}

	var applied *unstructured.Unstructured
	switch {
	case live == nil && s.finished:
		// Its work is done and its object gone: nothing to create, nothing to wait for.
		res.action, res.contentHash = ActionSkipped, ""
		return nil
	case live == nil:
		if err := c.checkProtectedData(ctx, owner, s); err != nil {
			return err
		}
		applied, res.action, err = c.create(ctx, owner, s, desired)
	default:
		applied, res.action, res.drifted, err = c.update(ctx, owner, s, desired, live)
	}
	if err != nil {
		if isNamespaceTerminating(err) {
			c.markNamespaceTerminating(s.id.Namespace)
			return errNamespaceTerminating(s.id)
		}
		return err
	}

	// The object to judge readiness and content by: the apply response, or the cached object.
	current := applied
	if current == nil {
		if current, err = resources.ToUnstructured(live, s.gvk); err != nil {
			return errors.Wrapf(err, "%s: convert live object", s.id)
		}
	}
	res.live = current
	if s.createOnly {
		// A create-only object's content is what the API server holds (a generated password).
		if res.contentHash, err = resources.ContentHash(current); err != nil {
			return errors.Wrapf(err, "%s: hash content", s.id)
		}
	}
	_, span := startSpan(ctx, spanReadiness)
	err = c.checkReady(s, current)
	var w *waitingError
	if errors.As(err, &w) {
		span.SetAttributes(attrOutcome.String(string(kdagv1alpha1.NodeWaiting)))
		endSpan(span, nil)
	} else {
		endSpan(span, err)
	}
	return err
}

// desired returns the node's object as it will be applied: the author's object with the node's
// mutations, kdag's labels, the owner reference, the dependencies' hash and the desired hash.
func (c *Controller) desired(ctx context.Context, owner client.Object, s *nodeSpec, results []nodeResult) (*unstructured.Unstructured, error) {
	obj, ok := s.obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, errors.Errorf("%s: object is not a client.Object", s.id)
	}
	for _, m := range s.mutations {
		if err := m(ctx, owner, obj); err != nil {
			return nil, errors.Wrapf(err, "%s: mutation", s.id)
		}
	}
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[kdagv1alpha1.LabelManagedBy] = "kdag"
	lbls[kdagv1alpha1.LabelController] = c.name
	lbls[kdagv1alpha1.LabelOwnerUID] = string(owner.GetUID())
	obj.SetLabels(lbls)
	if s.keep {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[kdagv1alpha1.AnnotationResourcePolicy] = kdagv1alpha1.ResourcePolicyKeep
		obj.SetAnnotations(ann)
	}
	if ownedByReference(owner, s) {
		obj.SetOwnerReferences(nil)
		if err := controllerutil.SetControllerReference(owner, obj, c.scheme); err != nil {
			return nil, errors.Wrapf(err, "%s: set owner reference", s.id)
		}
	}

	u, err := resources.Desired(obj, s.gvk)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: prepare for apply", s.id)
	}
	if depHash := dependenciesHash(s, results); depHash != "" {
		setAnnotation(u, depHash, kdagv1alpha1.AnnotationDependenciesHash)
		if err := annotatePodTemplate(u, kdagv1alpha1.AnnotationDependenciesHash, depHash); err != nil {
			return nil, errors.Wrapf(err, "%s: annotate pod template", s.id)
		}
	}
	hash, err := resources.DesiredHash(u, kdagv1alpha1.AnnotationDesiredHash, tracing.AnnotationTraceParent)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: hash desired object", s.id)
	}
	setAnnotation(u, hash, kdagv1alpha1.AnnotationDesiredHash)
	return u, nil
}

// ownedByReference reports whether the node's object gets a controller owner reference to
// owner, so that the garbage collector deletes it with the owner and the Owns watch maps its
// events back: yes unless the object is in another namespace than a namespaced owner, or
// cluster-scoped under a namespaced owner (an owner reference cannot cross namespaces), or kept
// (Keep: the garbage collector must not delete it). Such objects are tracked by kdag's labels
// and field manager, and the owner holds kdag's finalizer (needsFinalizer).
func ownedByReference(owner client.Object, s *nodeSpec) bool {
	return !s.keep && (owner.GetNamespace() == "" || s.id.Namespace == owner.GetNamespace())
}

// needsFinalizer reports whether a graph holds an object that only kdag can delete or orphan
// when the owner is deleted (one not owned by reference).
func needsFinalizer(owner client.Object, specs []*nodeSpec) bool {
	for _, s := range specs {
		if !s.reference && !ownedByReference(owner, s) {
			return true
		}
	}
	return false
}

// mayAdopt reports whether node s may take over an existing object it did not create, whose
// annotations are given: with Adopt, or when the object's kdagv1alpha1.AnnotationAdopt names this owner.
func (c *Controller) mayAdopt(owner client.Object, s *nodeSpec, annotations map[string]string) bool {
	if s.adopt {
		return true
	}
	want, ok := annotations[kdagv1alpha1.AnnotationAdopt]
	if !ok {
		return false
	}
	return want == c.adoptValue(owner, s.id.Namespace) ||
		want == c.ownerGVK.Kind+"/"+owner.GetNamespace()+"/"+owner.GetName()
}

// adoptValue is the kdagv1alpha1.AnnotationAdopt value naming owner on an object in namespace: "Kind/name"
// when they share the namespace, "Kind/namespace/name" otherwise.
func (c *Controller) adoptValue(owner client.Object, namespace string) string {
	if owner.GetNamespace() == namespace {
		return c.ownerGVK.Kind + "/" + owner.GetName()
	}
	return c.ownerGVK.Kind + "/" + owner.GetNamespace() + "/" + owner.GetName()
}

// dependenciesHash combines the content hashes of the node's blockers (DependsOn, not After),
// "" without such blockers. A Builder.Reference counts like an owned object: the hash of the
// keys its dependents read.
func dependenciesHash(s *nodeSpec, results []nodeResult) string {
	hashes := make(map[string]string, len(s.blockers))
	for _, b := range s.blockers {
		if !s.orderOnly(b) {
			hashes[b.id.String()] = results[b.index].contentHash
		}
	}
	if len(hashes) == 0 {
		return ""
	}
	return resources.CombineHashes(hashes)
}

// create writes a node's object that the cache does not hold. The cache only holds objects
// with kdag's labels, so a miss does not tell a new object from one kdag did not create (or one
// the cache has not seen yet). create applies the object on the condition that it does not
// exist (createIfAbsent): one round trip for a new object, and a foreign object created between
// the cache miss and the write is never overwritten. Only if something of that name exists does
// it read the object to decide: refuse it, adopt it, or apply to its own. Every create is that
// conditional apply: when the object it collided with is gone by the time it is read, create
// tries the conditional apply again rather than writing unconditionally.
func (c *Controller) create(ctx context.Context, owner client.Object, s *nodeSpec, desired *unstructured.Unstructured) (*unstructured.Unstructured, Action, error) {
	const attempts = 3
	existing := &metav1.PartialObjectMetadata{}
	for attempt := 1; ; attempt++ {
		switch err := c.createIfAbsent(ctx, s, desired); {
		case err == nil:
			return desired, ActionCreated, nil
		case !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err):
			return nil, ActionCreated, err
		}
		existing.SetGroupVersionKind(s.gvk)
		err := c.reader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
		switch {
		case apierrors.IsNotFound(err) && attempt < attempts:
			continue // deleted since the conditional apply: try it again
		case apierrors.IsNotFound(err):
			return nil, ActionCreated, errors.Errorf("%s: someone else keeps creating and deleting it while kdag creates it; kdag retries", s.id)
		case err != nil:
			return nil, "", errors.Wrapf(err, "%s: read", s.id)
		}
		break
	}
	if !c.owns(owner, existing) {
		if !c.mayAdopt(owner, s, existing.GetAnnotations()) {
			return nil, ActionRefused, c.refusal(owner, s, existing)
		}
		applied, err := c.adopt(ctx, s, desired)
		return applied, ActionAdopted, err
	}
	// Ours, but not in the cache: the watch is behind, the response to our write was lost, or
	// someone removed kdag's labels (the cache holds labelled objects only). A create-only object
	// is never written again but for its ownership (labels back); its content (a generated
	// password) feeds the dependents unchanged. Others are applied as usual, labels included.
	if s.createOnly && !c.hasOwnerLabels(owner, existing) {
		applied, err := c.applyOwnership(ctx, s, desired)
		return applied, ActionApplied, err
	}
	if s.createOnly {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(s.gvk)
		if err := c.reader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
			return nil, "", errors.Wrapf(err, "%s: read", s.id)
		}
		return live, ActionSkipped, nil
	}
	return desired, ActionApplied, c.apply(ctx, s, desired)
}

// adopt takes over an existing object that kdag did not create for this owner (a node with
// Adopt). A create-only node's object keeps its content: only kdag's labels and the owner
// reference are applied (applyOwnership), so a password a user or Helm generated is never
// replaced. Any other node's object gets the desired object, as on every later reconcile. It
// returns the object as the API server stored it.
func (c *Controller) adopt(ctx context.Context, s *nodeSpec, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if s.createOnly {
		return c.applyOwnership(ctx, s, desired)
	}
	if err := c.apply(ctx, s, desired); err != nil {
		return nil, err
	}
	return desired, nil
}

// applyOwnership makes an existing object kdag's without touching anything else: desired's
// labels and owner references are merged into it with a merge patch (an Update by kdag's field
// manager, conditional on the object's resourceVersion). Not a server-side apply: an apply that
// leaves out fields kdag's field manager owned before (an object kdag orphaned and now adopts
// again) would delete them, a generated password among them. It returns the whole object from
// the API server's response.
func (c *Controller) applyOwnership(ctx context.Context, s *nodeSpec, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(s.gvk)
	if err := c.reader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		return nil, errors.Wrapf(err, "%s: read", s.id)
	}
	owned := live.DeepCopy()
	lbls := owned.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	maps.Copy(lbls, desired.GetLabels())
	owned.SetLabels(lbls)
	refs := desired.GetOwnerReferences()
	for _, ref := range live.GetOwnerReferences() {
		if ref.Controller == nil || !*ref.Controller { // one controller: kdag's owner, if any
			if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == ref.UID }) {
				refs = append(refs, ref)
			}
		}
	}
	owned.SetOwnerReferences(refs)
	patch := client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})
	if err := c.client.Patch(ctx, owned, patch, client.FieldOwner(c.opts.FieldManager)); err != nil {
		return nil, errors.Wrapf(err, "%s: take ownership", s.id)
	}
	return owned, nil
}

// update decides whether a cached object needs a write and applies it if so. It returns a nil
// object when it skipped the write. A repair of another writer's changes is subject to the drift
// budget: once spent, update writes nothing and returns a *DriftConflictError.
func (c *Controller) update(ctx context.Context, owner client.Object, s *nodeSpec, desired *unstructured.Unstructured, live client.Object) (*unstructured.Unstructured, Action, []string, error) {
	if !c.owns(owner, live) {
		if !c.mayAdopt(owner, s, live.GetAnnotations()) {
			return nil, ActionRefused, nil, c.refusal(owner, s, live)
		}
		applied, err := c.adopt(ctx, s, desired)
		return applied, ActionAdopted, nil, err
	}
	if s.createOnly && !c.hasOwnerLabels(owner, live) {
		// Ours by its owner reference, but someone removed a label: put kdag's labels back.
		applied, err := c.applyOwnership(ctx, s, desired)
		return applied, ActionApplied, nil, err
	}
	if s.createOnly {
		return nil, ActionSkipped, nil, nil
	}
	hash := desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash]
	if c.isVerified(live, hash) {
		return nil, ActionSkipped, nil, nil
	}
	liveU, err := resources.ToUnstructured(live, s.gvk)
	if err != nil {
		return nil, "", nil, errors.Wrapf(err, "%s: convert live object", s.id)
	}
	fields, err := resources.DriftFields(liveU, desired, c.opts.FieldManager)
	if err != nil {
		return nil, "", nil, errors.Wrapf(err, "%s: compare managed fields", s.id)
	}
	drifted := driftPaths(fields)
	unchanged := liveU.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash] == hash
	if len(drifted) == 0 && unchanged {
		missing, err := c.missingFields(ctx, liveU, desired)
		if err != nil {
			// Whether someone removed a field kdag set is unknown: apply, which repairs it if
			// so, and which the verified record then spares the next reconciles.
			logFrom(ctx).Info("cannot check for fields removed by others; applying", "node", s.id.String(), "error", err.Error())
			unchanged = false
		}
		drifted = missing
	}
	if len(drifted) == 0 && unchanged {
		c.verified.Store(live.GetUID(), verifiedAt{resourceVersion: live.GetResourceVersion(), desiredHash: hash})
		return nil, ActionSkipped, nil, nil
	}
	if len(drifted) > 0 {
		if d := c.drift.decide(live.GetUID()); !d.repair {
			conflict := newDriftConflict(s.id, c.opts.FieldManager, fields, drifted)
			conflict.retryAfter, conflict.started = d.hold, d.started
			return nil, ActionHeld, nil, conflict
		}
	}
	if err := c.apply(ctx, s, desired); err != nil {
		// Not a repair: only a write the API server accepted repairs anything.
		return nil, ActionApplied, nil, err
	}
	return desired, ActionApplied, drifted, nil
}

// verifiedAt is the state in which kdag last found an object as it wants it (Controller.verified).
type verifiedAt struct {
	resourceVersion, desiredHash string
}

// isVerified reports whether kdag found live, at its resourceVersion, as it wants it with the
// desired hash hash: nothing changed the object since, so the drift check would find nothing.
func (c *Controller) isVerified(live client.Object, hash string) bool {
	v, ok := c.verified.Load(live.GetUID())
	return ok && v.(verifiedAt) == verifiedAt{resourceVersion: live.GetResourceVersion(), desiredHash: hash} &&
		live.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash] == hash
}

// driftPaths returns the distinct paths of fields, sorted.
func driftPaths(fields []resources.FieldDrift) []string {
	var paths []string
	for _, f := range fields {
		if len(paths) == 0 || paths[len(paths)-1] != f.Path {
			paths = append(paths, f.Path)
		}
	}
	return paths
}

// absentResourceVersion is the resourceVersion createIfAbsent applies with. An apply that
// carries metadata.resourceVersion uses it as a precondition on an existing object (the API
// server answers 409 Conflict when it differs), and the server drops it when the apply creates
// the object. etcd's revision 1 is that of the empty store, before any write, so no object has
// it: the apply creates the object or fails.
const absentResourceVersion = "1"

// createIfAbsent applies desired like apply, but only if no object of its name exists: it
// returns a Conflict error (apierrors.IsConflict) without writing anything when one does, so
// the existence check and the create are one atomic request. On success desired holds the
// response, whose resourceVersion is the real one.
func (c *Controller) createIfAbsent(ctx context.Context, s *nodeSpec, desired *unstructured.Unstructured) error {
	desired.SetResourceVersion(absentResourceVersion)
	err := c.apply(ctx, s, desired)
	if err != nil && desired.GetResourceVersion() == absentResourceVersion {
		desired.SetResourceVersion("")
	}
	return err
}

// apply server-side applies desired with kdag's field manager, forcing ownership (kdag only
// applies objects it created or was told to adopt), and leaves the response in desired.
//
// A custom resource (a child owner) gets the trace context of this reconcile in an annotation,
// so its own controller's reconcile links to this one. The annotation is left out of the
// desired hash and set only here, on a write that happens anyway: it never causes a write.
func (c *Controller) apply(ctx context.Context, s *nodeSpec, desired *unstructured.Unstructured) (err error) {
	ctx, span := startSpan(ctx, spanApply)
	defer func() { endSpan(span, err) }()
	if !clientgoscheme.Scheme.Recognizes(s.gvk) {
		if tp, ok := tracing.InjectAnnotation(ctx); ok {
			setAnnotation(desired, tp, tracing.AnnotationTraceParent)
		}
	}
	err = c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired),
		client.FieldOwner(c.opts.FieldManager), client.ForceOwnership)
	if isTerminal(err) {
		// Retrying cannot help: say what can.
		return errors.Wrapf(err, "%s: apply refused, change the owner's spec that produces it", s.id)
	}
	if status := apierrors.APIStatus(nil); errors.As(err, &status) && deniedByAdmission(status.Status().Message) {
		return errors.Wrapf(err, "%s: apply denied by admission control, kdag retries: change the policy or webhook, or the owner's spec", s.id)
	}
	if err != nil {
		return errors.Wrapf(err, "%s: apply", s.id)
	}
	// The response is the object as kdag wants it: nothing to check until it changes.
	c.verified.Store(desired.GetUID(), verifiedAt{
		resourceVersion: desired.GetResourceVersion(), desiredHash: desired.GetAnnotations()[kdagv1alpha1.AnnotationDesiredHash]})
	return nil
}

// missingFields returns the fields of desired that kdag's field manager no longer holds on live
// and that do not hold the desired value: someone removed or replaced them, maybe while kdag was
// not running (resources.MissingFields, with the API server's schema of the object's
// GroupVersion, fetched at the first check of this process). Call it only when live carries
// desired's hash, i.e. desired is what kdag last applied. Its errors name the object, not values.
func (c *Controller) missingFields(ctx context.Context, live, desired *unstructured.Unstructured) ([]string, error) {
	return resources.MissingFields(live, desired, c.opts.FieldManager, c.schemas.WithContext(ctx))
}

// checkReady returns nil when current is ready, a *waitingError when not yet, and an error when
// it failed for good (a Failed Job) or the readiness function failed.
func (c *Controller) checkReady(s *nodeSpec, current *unstructured.Unstructured) error {
	if s.readyWhen != nil {
		typed, err := c.newObject(s)
		if err != nil {
			return err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(current.Object, typed); err != nil {
			return errors.Wrapf(err, "%s: convert for readiness", s.id)
		}
		ok, err := s.readyWhen(typed)
		var notReady *NotReadyError
		switch {
		case errors.As(err, &notReady):
			return &waitingError{msg: s.id.String() + " is not ready: " + notReady.Reason, detail: notReady.Reason}
		case err != nil:
			return errors.Wrapf(err, "%s: readiness", s.id)
		case !ok:
			return &waitingError{msg: s.id.String() + " is not ready"}
		}
		return nil
	}
	r, err := resources.Ready(current)
	switch {
	case err != nil:
		return errors.Wrapf(err, "%s: readiness", s.id)
	case r.Status == resources.StatusFailed:
		return newObjectFailed(s.id, current, r.Message)
	case !r.Ready:
		return &waitingError{msg: s.id.String() + " is not ready (" + r.Status + ")"}
	}
	return nil
}

func (c *Controller) newObject(s *nodeSpec) (client.Object, error) {
	obj, err := c.scheme.New(s.gvk)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: new object", s.id)
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, errors.Errorf("%s: %T is not a client.Object", s.id, obj)
	}
	return co, nil
}

func setAnnotation(u *unstructured.Unstructured, value, key string) {
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	u.SetAnnotations(ann)
}

// annotatePodTemplate sets key on the pod template of a workload (Deployment, StatefulSet,
// DaemonSet, ReplicaSet, Job: spec.template; CronJob: spec.jobTemplate.spec.template), so that
// a change of the value rolls the pods. Other kinds are left alone.
func annotatePodTemplate(u *unstructured.Unstructured, key, value string) error {
	for _, path := range [][]string{{"spec", "template"}, {"spec", "jobTemplate", "spec", "template"}} {
		tmpl, found, err := unstructured.NestedMap(u.Object, path...)
		if err != nil || !found {
			continue
		}
		if _, isPod := tmpl["spec"]; !isPod {
			continue
		}
		return unstructured.SetNestedField(u.Object, value, append(path, "metadata", "annotations", key)...)
	}
	return nil
}

// foreignManager names the field managers of an object kdag did not create, for the message.
func foreignManager(entries []metav1.ManagedFieldsEntry, self string) string {
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Manager != self {
			seen[e.Manager] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "unknown"
	}
	return names[0]
}
