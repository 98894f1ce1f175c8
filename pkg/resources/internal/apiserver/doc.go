// Package apiserver holds the tests of package resources that need a real kube-apiserver
// (managed fields, server-side apply merges, the OpenAPI schema): kept apart so that
// `go test ./pkg/resources/` runs with no control-plane binaries. It has no non-test code.
package apiserver
