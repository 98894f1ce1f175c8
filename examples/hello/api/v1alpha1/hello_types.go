package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// GroupVersion is the API group and version of Hello.
var GroupVersion = schema.GroupVersion{Group: "examples.kdag.dev", Version: "v1alpha1"}

// AddToScheme adds Hello and HelloList to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Hello{}, &HelloList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// HelloSpec is the site a Hello serves.
type HelloSpec struct {
	// Pages are the site's files by name ("index.html": its content).
	// +optional
	Pages map[string]string `json:"pages,omitempty"`
	// Replicas is the number of web servers.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
}

// HelloStatus is kdag's status block: conditions, observedGeneration, what the site waits for.
type HelloStatus struct {
	kdagv1alpha1.Status `json:",inline"`
}

// Hello is a web site: its pages in a ConfigMap, served by a Deployment, behind a Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type Hello struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HelloSpec   `json:"spec,omitempty"`
	Status HelloStatus `json:"status,omitempty"`
}

// HelloList is a list of Hellos.
//
// +kubebuilder:object:root=true
type HelloList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Hello `json:"items"`
}
