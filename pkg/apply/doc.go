// Package apply is kdag's apply engine: it brings one desired object to the cluster the way every
// node of a kdag graph is written, and says what it did, in the spirit of Flux's pkg/ssa. It is
// usable without the Controller (pkg/controller), which keeps the orchestration: the graph,
// readiness, prune and status.
//
// Engine.Apply takes a desired object that carries kdag's labels, its desired-hash annotation
// and, where one can be held, the owner reference (Desired prepares it, as the Controller does
// for every node), the live object from a cache (or nil) and the node's policy, and returns a Change: the Action (created,
// applied, skipped, adopted, refused, held), the object as the API server holds it afterwards,
// and the fields another writer had changed that the write repaired. It:
//
//   - creates with one server-side apply conditional on the object's absence (resourceVersion
//     "1"), so that an object someone else created meanwhile is never overwritten;
//   - refuses an object that is not the owner's (ownership is a controller owner reference, or,
//     where none can be held, kdag's labels and field manager: Owns), unless the policy says
//     Adopt or the object's kdag.dev/adopt annotation names the owner; adopting a create-only
//     object takes ownership with a merge patch and never changes its data;
//   - skips an object whose desired hash is unchanged and whose fields kdag owns still hold the
//     desired values: values another field manager changed (resources.DriftFields) and fields
//     removed from kdag's Apply entry (resources.MissingFields, with the API server's OpenAPI
//     schema, so changes made while kdag was down are found too); an object verified at its
//     resourceVersion is not examined again, and one changed since only in fields that are not
//     kdag's (a controller's status, another writer's label: kdag's Apply entry is byte for
//     byte the one verified) needs no schema;
//   - repairs drift with a forced apply, at most Options.DriftRepairLimit times per
//     DriftRepairWindow and object, then holds with backoff (*DriftConflictError); or, with
//     Policy.Drift DriftReport, writes nothing and returns the drifted fields with action
//     Reported;
//   - sends Policy.Ignore's fields on create only, and leaves them out of later applies and of
//     the drift comparison, handing them to "<field manager>-released" first so that they keep
//     their values.
//
// Engine.Orphan and Engine.Delete release or delete an object the owner no longer needs.
//
// Rules followed: server-side apply and managed fields (KEP-555), owner references and garbage
// collection, the API server's preconditions (resourceVersion, UID).
package apply
