package controller

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Static shards, as Flux shards its controllers: each manager reconciles the owners
// labelled kdag.dev/shard with its shard's name (WithShard), an unsharded manager those without
// the label. The manager's cache holds only its shard's owners and objects (CacheOptions), and
// the objects kdag applies carry their owner's shard label (apply.Desired), so a child owner
// lands in its parent's shard. With dynamic shards (package shard), an owner annotated
// kdag.dev/shard-next is handed over by its shard's Reconcile instead of reconciled (handOver).
// docs/sharding.md is the user's side.

// ValidateShard returns nil when shard can name a shard: "" (no shard) or a DNS-1123 label
// (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63
// characters). That is a valid label value, and, unlike some label values ('_', upper case), it
// also makes a valid Lease name in LeaderElectionID. The error says what is wrong and how to fix
// it.
func ValidateShard(shard string) error {
	if shard == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(shard); len(msgs) > 0 {
		return errors.Errorf("shard %q is not a valid shard name: %s (it is the value of the %s label and part of the "+
			"leader election Lease's name)", shard, strings.Join(msgs, "; "), kdagv1alpha1.LabelShard)
	}
	return nil
}

// LeaderElectionID returns the leader election ID (the Lease's name) of a manager of shard whose
// unsharded ID is id: id itself without a shard, else "<shard>.<id>" ("a.kdag.kdag.dev"), so
// that the managers of different shards do not elect against each other while the replicas of
// one shard still do. It returns an error when shard is not valid (ValidateShard) or the result
// is not a valid Lease name (a DNS-1123 subdomain).
func LeaderElectionID(id, shard string) (string, error) {
	if err := ValidateShard(shard); err != nil {
		return "", err
	}
	if shard != "" {
		id = shard + "." + id
	}
	if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 {
		return "", errors.Errorf("leader election ID %q is not a valid Lease name: %s", id, strings.Join(msgs, "; "))
	}
	return id, nil
}

// shardRequirement returns the label requirement that selects shard's objects:
// kdag.dev/shard=shard, or, without a shard, no kdag.dev/shard label at all. It returns an error
// when shard is not valid.
func shardRequirement(shard string) (labels.Requirement, error) {
	if err := ValidateShard(shard); err != nil {
		return labels.Requirement{}, err
	}
	op, values := selection.Equals, []string{shard}
	if shard == "" {
		op, values = selection.DoesNotExist, nil
	}
	req, err := labels.NewRequirement(kdagv1alpha1.LabelShard, op, values)
	if err != nil {
		return labels.Requirement{}, errors.WithStack(err)
	}
	return *req, nil
}

// inShard reports whether owner is the Controller's to reconcile: labelled with its shard, or,
// without a shard, not labelled at all. The manager's cache holds only such owners when it was
// set up with CacheOptions; this check keeps a manager whose cache is not from reconciling
// another shard's owners.
func (c *Controller) inShard(owner client.Object) bool {
	shard, ok := owner.GetLabels()[kdagv1alpha1.LabelShard]
	if c.opts.Shard == "" {
		return !ok
	}
	return ok && shard == c.opts.Shard
}

// handOverRetry is how soon a hand-over that lost a race with another write of the owner (a
// 409 Conflict) is tried again, if no event of the newer owner comes first.
const handOverRetry = time.Second

// handOverTo returns the shard the assigner of dynamic shards asks this Controller to hand owner
// over to (kdagv1alpha1.AnnotationShardNext), and true, when the owner is in the Controller's
// shard, is not being deleted (teardown stays with the shard that holds it) and the annotation
// names another valid shard. A manager without a shard never hands over: the assigner labels an
// owner without a shard directly.
func (c *Controller) handOverTo(owner client.Object) (string, bool) {
	next, ok := owner.GetAnnotations()[kdagv1alpha1.AnnotationShardNext]
	if !ok || c.opts.Shard == "" || next == "" || next == c.opts.Shard || !owner.GetDeletionTimestamp().IsZero() ||
		ValidateShard(next) != nil {
		return "", false
	}
	return next, true
}

// handOver gives owner to shard next, the second half of the dynamic shards' handshake
// (docs/sharding.md): one patch, conditional on the owner's resourceVersion, sets its
// kdagv1alpha1.LabelShard and AnnotationShardAssigned to next and removes AnnotationShardNext.
// The owner then leaves this manager's cache and enters next's. A conflict (the owner changed
// since the cache read it) is retried after handOverRetry, or sooner by the newer owner's event;
// other errors are returned for controller-runtime's backoff. Nothing else is written.
func (c *Controller) handOver(ctx context.Context, owner client.Object, next string) (reconcile.Result, error) {
	before, ok := owner.DeepCopyObject().(client.Object)
	if !ok {
		return reconcile.Result{}, errors.Errorf("%s %s: copy for the hand-over", c.ownerGVK.Kind, client.ObjectKeyFromObject(owner))
	}
	lbls, anns := maps.Clone(owner.GetLabels()), maps.Clone(owner.GetAnnotations())
	lbls[kdagv1alpha1.LabelShard] = next
	anns[kdagv1alpha1.AnnotationShardAssigned] = next
	delete(anns, kdagv1alpha1.AnnotationShardNext)
	owner.SetLabels(lbls)
	owner.SetAnnotations(anns)
	err := c.client.Patch(ctx, owner, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: handOverRetry}, nil
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, errors.Wrapf(err, "%s %s: hand over from shard %s to shard %s", c.ownerGVK.Kind,
			client.ObjectKeyFromObject(owner), c.opts.Shard, next)
	}
	log.FromContext(ctx).Info("handed the owner over to another shard", "controller", c.name, "owner",
		client.ObjectKeyFromObject(owner).String(), "from", c.opts.Shard, "to", next)
	return reconcile.Result{}, nil
}
