// Package resources holds what kdag's generic controller does to one object of the graph, apart
// from talking to the API server: prepare it for server-side apply, decide whether a write is
// needed, hash what dependents consume, and tell whether it is ready. Every function is pure: it
// reads its arguments, never modifies them, and makes no API call. The one thing that needs the
// API server, its OpenAPI schemas, comes in as an argument (a managedfields.TypeConverter from
// package schemas).
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
// unchanged object without a write. The annotation alone cannot see edits by others, so two
// functions read the live object's managed fields (server-side apply, KEP-555: every field has a
// set of owning field managers; an Update by someone else moves ownership of the fields it changed
// to that manager):
//   - Drift (and DriftFields, which names the managers) reports the fields kdag sets whose value
//     another manager changed, from the other managers' entries;
//   - MissingFields reports the fields of the desired object that kdag's own Apply entry no longer
//     holds and whose live value is not the desired one: removed or replaced by someone else, an
//     env var, a container port, a label, an atomic map alike. It computes the desired object's
//     field set with the API server's own schema, through a managedfields.TypeConverter that
//     package schemas builds from the server's OpenAPI v3 documents; it needs no memory of an
//     earlier apply, so edits made while kdag was not running are found too.
//
// kdag skips the write only when the hash matches and both are empty.
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
// completed. A ReadyFunc replaces that rule for a node or a kind; CustomResourceReady is the one
// for custom resources whose controller writes kstatus conditions (kdag owners among them): it
// waits with a NotReadyError carrying the child's Ready message, and fails with a terminal
// StalledError when the child is Stalled.
//
// # References
//
// AppendReferences lists the objects a typed object names (a pod template's ConfigMaps,
// Secrets, claims and ServiceAccount, a binding's Role, an Ingress's Services and TLS Secrets),
// as graph.NodeIDs: the edges kdag's Graph infers between nodes.
package resources
