package controller

import (
	"context"

	"github.com/kdag-dev/kdag/pkg/apply"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	desired, err := c.desired(owner, s, results)
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

	if live == nil && s.finished {
		// Its work is done and its object gone: nothing to create, nothing to wait for.
		res.action, res.contentHash = apply.Skipped, ""
		return nil
	}
	if live == nil {
		if err := c.checkProtectedData(ctx, owner, s); err != nil {
			return err
		}
	}
	change, err := c.engine.Apply(ctx, c.applyOwner(owner), desired, live, apply.Policy{CreateOnly: s.createOnly, Adopt: s.adopt})
	res.action, res.drifted = change.Action, change.Drifted
	if err != nil {
		if isNamespaceTerminating(err) {
			c.markNamespaceTerminating(s.id.Namespace)
			return errNamespaceTerminating(s.id)
		}
		return err
	}

	// The object to judge readiness and content by: the apply response, or the cached object.
	current := change.Object
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
		tracing.EndSpan(span, nil)
	} else {
		tracing.EndSpan(span, err)
	}
	return err
}

// applyOwner is owner as the apply engine knows it.
func (c *Controller) applyOwner(owner client.Object) apply.Owner {
	return apply.Owner{Object: owner, Kind: c.ownerGVK.Kind, Controller: c.name}
}

// desired returns the node's object as it will be applied: the author's object with
// kdag's labels, the Keep annotation, the owner reference, the dependencies' hash and the desired hash.
func (c *Controller) desired(owner client.Object, s *nodeSpec, results []nodeResult) (*unstructured.Unstructured, error) {
	obj, ok := s.obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, errors.Errorf("%s: object is not a client.Object", s.id)
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
