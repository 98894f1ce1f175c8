package controllertest

import (
	"context"
	"fmt"
	"strconv"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// steppedKey marks the context of a reconcile the test asked for (Harness.Reconcile).
type steppedKey struct{}

// keep is the controller.ReconcilerWrapper of every harness: it keeps each component's
// reconciler, by owner kind, for Reconciler and Reconcile; on a stepped harness it drops the
// requests of the controller's queue.
func (h *Harness) keep(_ string, owner client.Object, next reconcile.Reconciler) reconcile.Reconciler {
	gvk := h.ownerGVK(owner.DeepCopyObject().(client.Object))
	h.mu.Lock()
	h.reconcilers[gvk] = next
	h.mu.Unlock()
	if !h.opts.Stepped {
		return next
	}
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if ctx.Value(steppedKey{}) == nil {
			h.dropped.Add(1)
			return reconcile.Result{}, nil // the queue's: the test reconciles
		}
		return next.Reconcile(ctx, req)
	})
}

// Reconcile runs one reconcile of owner (selected by name, and namespace or the harness's) by
// the component whose owner kind it is, with ctx (a logger in it, say; its end ends the
// reconcile), and returns what the reconciler returned. The reconciler reads the manager's cache:
// what the test wrote through the harness (Create, Update, MarkReady) is there; wait with
// WaitCached for what it wrote with Client. It fails t on a harness whose reconciles are its
// queue's (not Options.Stepped) or when no component reconciles owner's kind.
func (h *Harness) Reconcile(ctx context.Context, owner client.Object) (reconcile.Result, error) {
	h.t.Helper()
	if !h.opts.Stepped {
		h.t.Fatalf("controllertest: Reconcile %s: the harness's reconciles are its queue's (Options.Stepped is off)", h.describe(owner))
	}
	r := h.Reconciler(owner)
	return r.Reconcile(context.WithValue(ctx, steppedKey{}, true), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(owner)})
}

// Reconciler returns the reconciler of the component whose owner kind owner's is, in the
// harness's running manager, as the component registered it (inside its own Options.Wrappers):
// for a test of kdag itself that looks inside it. It fails t when no component reconciles the
// kind.
func (h *Harness) Reconciler(owner client.Object) reconcile.Reconciler {
	h.t.Helper()
	gvk := h.ownerGVK(owner)
	h.mu.Lock()
	r := h.reconcilers[gvk]
	h.mu.Unlock()
	if r == nil {
		h.t.Fatalf("controllertest: no component of the harness reconciles %s", gvk.Kind)
	}
	return r
}

// Cached reads obj (selected by name, and namespace or the harness's) from the manager's cache,
// which the reconcilers read, and reports whether the cache holds it. It fails t on any other
// error, or on a harness with no running manager of its own (ExploreCrashes runs several).
func (h *Harness) Cached(obj client.Object) bool {
	h.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(h.Namespace)
	}
	err := h.Manager().GetClient().Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if client.IgnoreNotFound(err) != nil {
		h.t.Fatalf("controllertest: read %s from the cache: %v", h.describe(obj), err)
	}
	return err == nil
}

// waitCached is WaitCached on a stepped harness (Options.Stepped), where the next reconcile
// must see what the test wrote; it does nothing on a harness whose reconciles are the queue's.
func (h *Harness) waitCached(obj client.Object) {
	h.t.Helper()
	if h.opts.Stepped {
		h.WaitCached(obj)
	}
}

// WaitCached waits until the manager's cache holds obj (selected by name, and namespace or the
// harness's) at obj's resourceVersion or a later one: what a test wrote with Client is then what
// a reconcile reads. It fails t after Timeout, or on a harness with no manager of its own.
func (h *Harness) WaitCached(obj client.Object) {
	h.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(h.Namespace)
	}
	want, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		h.t.Fatalf("controllertest: %s: resourceVersion %q: %v", h.describe(obj), obj.GetResourceVersion(), err)
	}
	cached := obj.DeepCopyObject().(client.Object)
	poll.Until(h.t, fmt.Sprintf("controllertest: the cache holds %s at resourceVersion %d", h.describe(obj), want), Timeout,
		func(context.Context) string {
			if !h.Cached(cached) {
				return "not cached"
			}
			got, err := strconv.ParseUint(cached.GetResourceVersion(), 10, 64)
			if err != nil || got < want {
				return "cached at resourceVersion " + cached.GetResourceVersion()
			}
			return ""
		})
}

// Events returns the events (events.k8s.io/v1) in the harness's namespace with reason, oldest
// first as the API server lists them. Events are written asynchronously by the manager's
// recorder: wait for one with WaitEvent.
func (h *Harness) Events(reason string) []eventsv1.Event {
	h.t.Helper()
	var list eventsv1.EventList
	if err := h.Client.List(context.Background(), &list, client.InNamespace(h.Namespace)); err != nil {
		h.t.Fatalf("controllertest: list events in %s: %v", h.Namespace, err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// WaitEvent waits until an event of type typ (Normal, Warning) with reason is about obj
// (selected by kind and name) and returns it; it fails t after Timeout.
func (h *Harness) WaitEvent(obj client.Object, typ, reason string) eventsv1.Event {
	h.t.Helper()
	gvk := h.ownerGVK(obj)
	var found eventsv1.Event
	h.Eventually(fmt.Sprintf("%s event %s about %s", typ, reason, h.describe(obj)), func(context.Context) (bool, error) {
		for _, e := range h.Events(reason) {
			if e.Type == typ && e.Regarding.Kind == gvk.Kind && e.Regarding.Name == obj.GetName() {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// Reads returns the reads (GET, LIST; watches left out) the harness's managers sent to the API
// server since they started or since the last ResetWrites, in order, each as "GET path": a
// reconcile that reads from the cache sends none.
func (h *Harness) Reads() []string {
	var reads []string
	for _, r := range h.requests.Requests() {
		if !r.Watch && !r.Write() {
			reads = append(reads, r.String())
		}
	}
	return reads
}
