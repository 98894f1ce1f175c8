// Package shard runs dynamic shards (kdag's --shards=auto): every replica of the operator is a
// shard of its own, named by its ID, and the owners without a static shard are spread over the
// live replicas by consistent hashing, so that adding a replica takes about 1/N of the owners and
// losing one gives its owners to the others.
//
//   - Options is a manager's sharding (kdag's --shard, --shards=auto, --shard-id,
//     --shard-lease-duration): the cache selector (SelectCache), the Controllers' owner filter
//     (InShard) and hand-over wrapper (HandOver), the leader election, and the runnables below.
//   - HandOver wraps a Controller's reconciler: an owner annotated kdag.dev/shard-next is handed
//     over to that shard; every other request goes to the Controller.
//   - Member keeps the replica's Lease "<group>-shard-<id>" (coordination.k8s.io/v1, label
//     kdag.dev/shard-member=<group>) renewed in the operator's namespace with client-go's leader
//     election, and stops the manager when it cannot (fencing).
//   - Assigner, run by one replica (leader election), watches the member Leases and the owners'
//     metadata and writes each owner's kdag.dev/shard label: directly when the owner has none or
//     its shard's Lease expired, through a handshake with the current replica
//     (kdag.dev/shard-next, which HandOver honours) when that replica lives.
//   - Ring is the rendezvous hash that picks an owner's member.
//   - Unserved, for every manager, static shards and unsharded too (AddUnserved), warns about the
//     owners whose kdag.dev/shard label names a shard that no live Lease serves: a Warning event
//     ShardNotServed on each, and the gauge kdag_owners_unserved.
//
// Package controller knows no shard: the layer uses its generic hooks (controller.CacheOptions'
// entries, Options.OwnerFilter, Options.Wrappers, Options.NamespacedReferences). Usage, in main:
//
//	var o shard.Options
//	o.RegisterFlags(fs)
//	_ = fs.Parse(args)
//	o.LeaderElect, o.Namespace = leaderElect, leaderElectionNamespace
//	if err := o.Complete(); err != nil { ... }
//	mgrOpts, _ := o.ManagerOptions(ctrl.Options{Scheme: scheme, Cache: controller.CacheOptions(scheme, components...)})
//	mgr, _ := ctrl.NewManager(cfg, mgrOpts)
//	_ = controller.Setup(ctx, mgr, components, o.ControllerOptions(mgr))
//	_ = o.Add(mgr, components)
//
// docs/sharding.md ("Dynamic shards") describes the handshake, the fencing rule and the
// guarantees.
package shard
