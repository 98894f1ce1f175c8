// Package v1alpha1 is the hello operator's API: Hello, a web site served from its pages, in the
// group examples.kdag.dev.
//
// +kubebuilder:object:generate=true
// +groupName=examples.kdag.dev
// +versionName=v1alpha1
package v1alpha1
