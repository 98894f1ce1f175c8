// Package shard runs dynamic shards (kdag's --shards=auto): every replica of the operator is a
// shard of its own, named by its ID, and the owners without a static shard are spread over the
// live replicas by consistent hashing, so that adding a replica takes about 1/N of the owners and
// losing one gives its owners to the others.
//
//   - Member keeps the replica's Lease "<group>-shard-<id>" (coordination.k8s.io/v1, label
//     kdag.dev/shard-member=<group>) renewed in the operator's namespace, and stops the manager
//     when it cannot (fencing).
//   - Assigner, run by one replica (leader election), watches the member Leases and the owners'
//     metadata and writes each owner's kdag.dev/shard label: directly when the owner has none or
//     its shard's Lease expired, through a handshake with the current replica
//     (kdag.dev/shard-next, which pkg/controller's Reconcile honours) when that replica lives.
//   - Ring is the rendezvous hash that picks an owner's member.
//   - Unserved, for every manager, static shards and unsharded too (AddUnserved), warns about the
//     owners whose kdag.dev/shard label names a shard that no live Lease serves: a Warning event
//     ShardNotServed on each, and the gauge kdag_owners_unserved.
//
// A replica otherwise is a static shard: its components are given controller.WithShard(id) and
// its cache selects its shard (controller.CacheOptions). Usage, in main:
//
//	components := []controller.Component{controller.For("widgets", rm, controller.WithShard(id))}
//	mgr, _ := ctrl.NewManager(cfg, ctrl.Options{
//		Scheme:           scheme,
//		Cache:            controller.CacheOptions(scheme, components...),
//		LeaderElection:   true,
//		LeaderElectionID: shard.AssignerLeaderElectionID,
//		Controller:       config.Controller{NeedLeaderElection: ptr.To(false)},
//	})
//	_ = controller.Setup(ctx, mgr, components)
//	_ = shard.Add(mgr, id, components, shard.WithNamespace(namespace))
//
// docs/sharding.md ("Dynamic shards") describes the handshake, the fencing rule and the
// guarantees.
package shard
