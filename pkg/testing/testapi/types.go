package testapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// GroupVersion is the API group and version of Widget.
var GroupVersion = schema.GroupVersion{Group: "testing.kdag.dev", Version: "v1alpha1"}

// AddToScheme adds Widget and WidgetList to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// WidgetSpec is what a test asks a Widget's controller to build.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="minReplicas must not be greater than maxReplicas"
type WidgetSpec struct {
	// MinReplicas is the lower bound of Replicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	MinReplicas int32 `json:"minReplicas"`
	// MaxReplicas is the upper bound of Replicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=10
	MaxReplicas int32 `json:"maxReplicas"`
	// Replicas is passed to the workloads a test builds.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Components switches parts of the test graph on by name.
	// +optional
	// +listType=set
	Components []string `json:"components,omitempty"`
	// Data is copied into the ConfigMaps a test builds.
	// +optional
	Data map[string]string `json:"data,omitempty"`
}

// WidgetStatus is written by the controller under test: kdag's status block.
type WidgetStatus struct {
	kdagv1alpha1.Status `json:",inline"`
	// Endpoint is a status field of the owner's own, for tests of StatusReporter.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// Widget is the test owner.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec,omitempty"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetList is a list of Widgets.
//
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}
