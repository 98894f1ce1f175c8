// Package v1alpha1 is the API of the reference operator: Gitea with PostgreSQL and Valkey, in the
// group gitea.kdag.dev.
//
// Gitea is the user-facing kind. Its controller builds one child custom resource per component,
// each reconciled by its own controller:
//
//   - PostgreSQL: a single-instance database with generated credentials (unless the Gitea uses an
//     external database given by a Secret reference);
//   - Valkey: the cache, session and lock store (unless the cache is disabled);
//   - GiteaServer: the Gitea server itself, with its database migration gate.
//
// The child kinds may also be created directly. Every kind's status embeds kdag's status block
// (github.com/kdag-dev/kdag/pkg/api.Status): conditions Ready, Reconciling and Stalled,
// observedGeneration and a summary of the owner's graph, so `kubectl wait --for=condition=Ready`
// works on all of them.
//
// Defaults live in the CRD schema (markers below) so the API server fills them on create; the
// Default* constants repeat them for controllers that must fill an absent optional block, and a
// test keeps both in step.
//
// +kubebuilder:object:generate=true
// +groupName=gitea.kdag.dev
// +versionName=v1alpha1
package v1alpha1
