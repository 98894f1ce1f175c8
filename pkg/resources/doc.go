// Package resources holds what kdag's generic controller does to one object of the graph, apart
// from talking to the API server: prepare it for server-side apply, decide whether a write is
// needed, hash what dependents consume, and tell whether it is ready. Every function is pure: it
// reads its arguments, never modifies them, and makes no API call.
//
// # Apply preparation
//
// ToUnstructured turns a typed object (whose TypeMeta is empty when it comes from a
// controller-runtime cache) or an *unstructured.Unstructured into an unstructured copy with
// apiVersion and kind set. Desired does the same and removes what kdag's field manager must not
// claim with server-side apply: status, the metadata the API server sets, null values and the
// empty maps typed zero values produce (resources: {}), while keeping empty maps that mean
// something (emptyDir: {}).
//
// # Change detection
//
// DesiredHash hashes the desired object after mutations, for the annotation that lets kdag skip an
// unchanged object without a write. The annotation alone cannot see edits by others, so Drift reads
// the live object's managed fields (server-side apply, KEP-555: every field has a set of owning
// field managers; an Update by someone else moves ownership of the fields it changed to that
// manager) and reports the fields kdag sets whose value another manager changed. An edit that
// removes a field leaves no foreign owner behind; OwnedFieldsFingerprint covers it by fingerprinting
// kdag's own field set, which shrinks when that happens. kdag skips the write only when the hash
// matches, Drift is empty and the fingerprint is the one its last apply left.
//
// ContentHash hashes what a dependent consumes from a dependency (data of ConfigMaps and Secrets,
// spec of anything else) and CombineHashes folds several of them into one value, which kdag puts
// into the dependent's pod template so that a config change rolls the pods and nothing else does.
// Hashes are hex SHA-256 prefixes of HashLength characters over canonical JSON: the same across
// processes and map orders. They never expose content.
//
// # Readiness
//
// Ready applies kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status): Current is ready, InProgress
// is "wait", Failed lets the caller fail the node. The one deviation: a Job is ready only when it
// completed.
package resources
