// Package testapi is a tiny custom resource, Widget in the test-only group testing.kdag.dev, that
// tests use as an owner: it has a spec with a CEL rule, a status subresource with conditions and
// observedGeneration, and its CRD is embedded (CRDs) so that envtest installs it from any package.
//
// +kubebuilder:object:generate=true
// +groupName=testing.kdag.dev
// +versionName=v1alpha1
package testapi
