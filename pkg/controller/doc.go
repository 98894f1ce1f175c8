// Package controller is kdag's generic Controller: one reconciler for any custom resource (the
// owner) whose objects are listed by a small ResourceManager.
//
// A reconcile, in ten lines:
//
//  1. Get the owner from the cache; if it is being deleted, tear down (finalizer, reverse order).
//  2. Validate it (optional Validator); a failure is terminal: Stalled, no retry until it changes.
//  3. AddResources fills a Graph: typed objects, each with DependsOn blockers and options, and
//     References to objects the owner needs but kdag never writes (a user's Secret). The
//     Graph adds the edges the objects' references say (a pod template mounting a ConfigMap
//     of the graph, an Ingress routing to a Service of it; infer.go lists them).
//  4. The graph runs (pkg/graph): a node starts once its blockers are applied and ready.
//  5. A node gets kdag's labels, an owner reference, its blockers' content hash and its own hash.
//  6. The live object comes from the cache: same hash, no foreign write on kdag's fields and none
//     of them removed (its field set from the API server's schema; checked once per object
//     version, so after a restart too): skip.
//  7. Otherwise server-side apply with kdag's field manager; a drifted field is reverted, at most
//     Options.DriftRepairLimit times per DriftRepairWindow and object, then with backoff, or,
//     with the drift policy report (OnDrift, the owner's kdag.dev/drift), left and reported in
//     the owner's Drifted condition; IgnoreFields' fields are sent on create only.
//  8. Readiness is kstatus, and for a custom resource a status for the applied generation (or
//     the node's ReadyWhen, or its kind's Options.ReadyWhen); a node not ready holds its dependents,
//     not an error.
//  9. With no failed node, objects with the owner's UID label that left the graph are pruned.
//  10. The status (Ready, Reconciling, Stalled, observedGeneration, graph summary) is applied
//     only if it changed; transient errors back off, terminal ones wait for the owner to change.
//
// An operator author writes one ResourceManager per owner kind: the types it owns, and an
// AddResources that reads like the list of manifests with their dependencies (from
// examples/hello, the README tutorial's component, whose owner is the example's Hello):
//
//	func (ResourceManager) OwnedTypes() []client.Object {
//		return []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}}
//	}
//
//	func (ResourceManager) AddResources(_ context.Context, h *v1alpha1.Hello, b *controller.Graph) error {
//		b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: h.Name + "-pages"}, Data: h.Spec.Pages})
//		server := b.Add(deployment(h)) // mounts the pages: waits for them, rolls with them (inferred)
//		b.Add(service(h), controller.DependsOn(server))
//		return nil
//	}
//
// and registers it with a manager through Setup (package operator's Run calls it), one line per
// component:
//
//	controller.For("hello", ResourceManager{})
//
// This package is the authoring surface only. The loop itself (the reconcile, the status, prune,
// teardown and revisions) is the internal package reconciler, which these types wrap.
//
// pkg/controllertest is the test kit for components: golden plans, a manager on a real API
// server, table-driven cases.
//
// Rules followed: server-side apply and managed fields (KEP-555), kstatus conditions
// (sigs.k8s.io/cli-utils/pkg/kstatus), the API conventions for conditions and observedGeneration,
// owner references and garbage collection, and controller-runtime's terminal errors.
package controller
