package v1alpha1

// Labels and annotations kdag puts on every object it applies.
const (
	// LabelManagedBy is the standard app.kubernetes.io/managed-by label, set to "kdag".
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelController names the kdag controller that applied the object. The label-selected
	// cache (CacheByObject) keeps only objects that carry it.
	LabelController = "kdag.dev/controller"
	// LabelOwnerUID is the UID of the owner. Pruning and adoption decisions match on it, never on
	// names, so an owner deleted and re-created under the same name does not claim the old
	// owner's objects.
	LabelOwnerUID = "kdag.dev/owner-uid"
	// LabelShard on an owner names the shard whose manager reconciles it (static shards, as
	// in Flux): a manager started with a shard (shard.Options, kdag's --shard)
	// reconciles only owners labelled with its name; a manager without one only owners without
	// the label. kdag copies the owner's value onto every object it applies for the owner,
	// child owners included, so that the shard's label-selected cache holds them. The value is
	// a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters); an empty value
	// is a label no manager selects. docs/sharding.md says how to move an owner between shards.
	LabelShard = "kdag.dev/shard"
	// AnnotationShardAssigned on an owner says that kdag's shard assigner (dynamic shards,
	// --shards=auto, package shard) chose its LabelShard: its value is the shard the assigner (or
	// the replica that handed the owner over) wrote into the label, in the same patch. An owner
	// whose label equals it is dynamically sharded and may be moved by the assigner; an owner
	// with a LabelShard and no AnnotationShardAssigned, or a label that differs from it (a user
	// relabelled it), is statically sharded and left alone.
	AnnotationShardAssigned = "kdag.dev/shard-assigned"
	// AnnotationShardNext on a dynamically sharded owner names the shard the assigner moves it
	// to while the replica of its current shard is alive: that replica, on its next reconcile of
	// the owner, does no work and hands the owner over itself (LabelShard and
	// AnnotationShardAssigned set to the new shard, AnnotationShardNext removed, in one patch
	// conditional on the owner's resourceVersion), so that two replicas never reconcile the
	// owner at once. docs/sharding.md describes the handshake.
	AnnotationShardNext = "kdag.dev/shard-next"
	// LabelShardMember on a coordination.k8s.io Lease marks it as the membership Lease of one
	// replica of a dynamically sharded operator; its value is the operator's group ("kdag"), so
	// that the assigner lists the members of its own operator only.
	LabelShardMember = "kdag.dev/shard-member"

	// AnnotationDesiredHash is the hash of the desired object (after mutations) that kdag last
	// applied. An equal hash on the live object, with no drift in managed fields, skips the write.
	AnnotationDesiredHash = "kdag.dev/desired-hash"
	// AnnotationDependenciesHash is the hash of the node's blockers' content (ConfigMap and
	// Secret data, the spec of others), declared with DependsOn or inferred from the object's
	// references; After blockers do not count. On workloads it is also set on the pod
	// template, so a configuration change rolls the pods.
	AnnotationDependenciesHash = "kdag.dev/dependencies-hash"

	// AnnotationResourcePolicy set to ResourcePolicyKeep on an object kdag applies makes kdag
	// orphan the object instead of deleting it when it leaves the graph or its owner is deleted
	// (the name follows Helm's helm.sh/resource-policy). kdag sets it on Keep nodes; a user may
	// set it on any object.
	AnnotationResourcePolicy = "kdag.dev/resource-policy"
	// ResourcePolicyKeep is the value of AnnotationResourcePolicy that keeps an object.
	ResourcePolicyKeep = "keep"
	// AnnotationKeep set to "true" is a short alias of AnnotationResourcePolicy: keep, for users.
	// kdag itself writes AnnotationResourcePolicy only.
	AnnotationKeep = "kdag.dev/keep"

	// AnnotationDrift on an owner chooses what kdag does when another writer changes fields kdag
	// set on the owner's objects: DriftRepair (the default) reverts them, DriftReport
	// leaves them and reports them in the owner's Drifted condition, a Warning event and the
	// kdag_drift_reports_total metric. Set, it wins over the nodes' own drift policy
	// (controller.OnDrift). Any other value makes the owner Stalled until it is corrected.
	AnnotationDrift = "kdag.dev/drift"
	// DriftRepair is the value of AnnotationDrift that reverts drift.
	DriftRepair = "repair"
	// DriftReport is the value of AnnotationDrift that reports drift instead of reverting it.
	DriftReport = "report"
	// AnnotationAdopt on an object kdag did not create (or orphaned) names the owner that may
	// adopt it, as "<owner kind>/<owner name>" (an owner in the object's namespace) or
	// "<owner kind>/<owner namespace>/<owner name>": that owner's node of the object takes it
	// over as if it had Adopt (a create-only object keeps its data). kdag sets it when it
	// orphans a kept object; a user sets it to attach restored data to an owner.
	AnnotationAdopt = "kdag.dev/adopt"

	// Finalizer is held on owners whose ResourceManager is a Cleaner or whose Controller has
	// OrderedTeardown, and on owners whose graph holds an object that cannot carry an owner
	// reference to them (another namespace, cluster-scoped, Keep): kdag deletes or orphans
	// those objects itself when the owner is deleted.
	Finalizer = "kdag.dev/teardown"
)
