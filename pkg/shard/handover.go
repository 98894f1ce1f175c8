package shard

import (
	"context"
	"maps"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// handOverRetry is how soon a hand-over that lost a race with another write of the owner (a
// 409 Conflict) is tried again, if no event of the newer owner comes first.
const handOverRetry = time.Second

// HandOver returns the controller.ReconcilerWrapper of a manager of shard (a valid shard name,
// not ""), the second half of the dynamic shards' handshake (docs/sharding.md): for each request
// it reads the owner with c (the manager's cached client) and, when the owner is in shard, is
// not being deleted (teardown stays with the shard that holds it) and is annotated
// kdag.dev/shard-next with another valid shard, hands it over instead of reconciling it. Every
// other request goes to the wrapped reconciler, with "shard" in its context's logger.
//
// The hand-over is one patch, conditional on the owner's resourceVersion, that sets its
// kdag.dev/shard label and kdag.dev/shard-assigned annotation to the new shard and removes
// kdag.dev/shard-next; the owner then leaves this manager's cache, which makes the wrapped
// Controller forget it, and enters the new shard's. controller-runtime never runs two reconciles
// of one owner at once in one controller, so when the hand-over runs, this manager's previous
// reconcile of the owner has ended, and it starts no other. A conflict (the owner changed since
// the cache read it) is retried after a second, or sooner by the newer owner's event; another
// error is returned for controller-runtime's backoff.
func HandOver(c client.Client, shard string) controller.ReconcilerWrapper {
	return func(name string, owner client.Object, next reconcile.Reconciler) reconcile.Reconciler {
		return &handOver{client: c, shard: shard, controller: name, owner: owner, next: next}
	}
}

// handOver is the reconciler HandOver returns.
type handOver struct {
	client     client.Client
	shard      string
	controller string
	owner      client.Object // an empty owner of the controller's type
	next       reconcile.Reconciler
}

// Reconcile implements reconcile.Reconciler.
func (h *handOver) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("shard", h.shard))
	owner, ok := h.owner.DeepCopyObject().(client.Object)
	if !ok {
		return reconcile.Result{}, errors.Errorf("controller %s: %T is not a client.Object", h.controller, h.owner)
	}
	if err := h.client.Get(ctx, req.NamespacedName, owner); err != nil {
		return h.next.Reconcile(ctx, req) // gone, or an error the Controller reports in its terms
	}
	to, ok := h.to(owner)
	if !ok {
		return h.next.Reconcile(ctx, req)
	}
	return h.handOver(ctx, owner, to)
}

// to returns the shard the assigner asks this manager to hand owner over to, and true, when
// owner is in this manager's shard, not being deleted, and the annotation names another valid
// shard.
func (h *handOver) to(owner client.Object) (string, bool) {
	next, ok := owner.GetAnnotations()[kdagv1alpha1.AnnotationShardNext]
	if !ok || next == "" || next == h.shard || owner.GetLabels()[kdagv1alpha1.LabelShard] != h.shard ||
		!owner.GetDeletionTimestamp().IsZero() || ValidateName(next) != nil {
		return "", false
	}
	return next, true
}

// handOver gives owner to shard next.
func (h *handOver) handOver(ctx context.Context, owner client.Object, next string) (reconcile.Result, error) {
	before, ok := owner.DeepCopyObject().(client.Object)
	if !ok {
		return reconcile.Result{}, errors.Errorf("%T %s: copy for the hand-over", owner, client.ObjectKeyFromObject(owner))
	}
	lbls, anns := maps.Clone(owner.GetLabels()), maps.Clone(owner.GetAnnotations())
	lbls[kdagv1alpha1.LabelShard] = next
	anns[kdagv1alpha1.AnnotationShardAssigned] = next
	delete(anns, kdagv1alpha1.AnnotationShardNext)
	owner.SetLabels(lbls)
	owner.SetAnnotations(anns)
	err := h.client.Patch(ctx, owner, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: handOverRetry}, nil
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, errors.Wrapf(err, "controller %s: owner %s: hand over from shard %s to shard %s", h.controller,
			client.ObjectKeyFromObject(owner), h.shard, next)
	}
	log.FromContext(ctx).Info("handed the owner over to another shard", "controller", h.controller, "owner",
		client.ObjectKeyFromObject(owner).String(), "from", h.shard, "to", next)
	return reconcile.Result{}, nil
}
