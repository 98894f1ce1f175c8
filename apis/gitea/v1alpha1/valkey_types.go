package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// ValkeySpec is a single Valkey instance used as a cache, without persistence.
type ValkeySpec struct {
	// Version is the Valkey version, an image tag of the official image ("8.1"). Defaults to 8.1.
	// +optional
	// +kubebuilder:default="8.1"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+){0,2}$`
	Version string `json:"version,omitempty"`
	// Image is the Valkey image repository, without tag or digest: the tag is Version. Defaults
	// to docker.io/valkey/valkey.
	// +optional
	// +kubebuilder:default="docker.io/valkey/valkey"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.substring(self.lastIndexOf('/') + 1).contains(':')",message="image must be a repository without tag or digest: the tag is version"
	Image string `json:"image,omitempty"`
	// Resources of the Valkey container. Defaults to requests of 50m CPU and 64Mi memory when the
	// field is absent.
	// +optional
	// +kubebuilder:default={requests: {cpu: "50m", memory: "64Mi"}}
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !has(self.requests) || ['cpu', 'memory'].all(r, !(r in self.limits) || !(r in self.requests) || !isQuantity(string(self.limits[r])) || !isQuantity(string(self.requests[r])) || !quantity(string(self.limits[r])).isLessThan(quantity(string(self.requests[r]))))",message="resources.limits must not be below resources.requests (cpu, memory): the API server refuses such a container"
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`
	// Config holds valkey.conf directives, one per key, e.g. {"maxmemory": "128mb",
	// "maxmemory-policy": "allkeys-lru"}. The operator owns "port", "bind", "dir", "daemonize"
	// and persistence ("save", "appendonly"); those keys are rejected in any case (Valkey reads
	// directive names without case). A key is a directive name; a value is one line.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.lowerAscii() in ['port', 'bind', 'dir', 'daemonize', 'save', 'appendonly']))",message="config must not set port, bind, dir, daemonize, save or appendonly (in any case): the operator owns them"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z][A-Za-z0-9_-]*$'))",message="config keys must be directive names: letters, digits, '-' and '_'"
	Config map[string]ValkeyConfigValue `json:"config,omitempty"`
}

// ValkeyConfigValue is the value of one valkey.conf directive: one line (a newline would start a
// directive of its own).
//
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:Pattern=`^[^\r\n]*$`
type ValkeyConfigValue string

// ValkeyStatus is the observed state of a Valkey.
type ValkeyStatus struct {
	kdagv1alpha1.Status `json:",inline"`
	// ServiceName is the Service, in the Valkey's namespace, that clients connect to on port
	// 6379.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
}

// Valkey is a Valkey cache: a ConfigMap with valkey.conf, a Deployment and a Service. A Gitea
// with the cache enabled creates one; it can also be created on its own.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gtvk,categories=kdag
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.status.serviceName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Valkey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired instance.
	// +required
	Spec ValkeySpec `json:"spec"`
	// Status is written by the operator.
	// +optional
	Status ValkeyStatus `json:"status,omitempty"`
}

// ValkeyList is a list of Valkey.
//
// +kubebuilder:object:root=true
type ValkeyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Valkey `json:"items"`
}
