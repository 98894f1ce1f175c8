package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// PostgreSQLSpec is a single-instance PostgreSQL server with one database and one role.
type PostgreSQLSpec struct {
	// The version, image, storage and resources of the instance, as in a Gitea's
	// spec.database.managed.
	ManagedDatabaseSpec `json:",inline"`
	// Database is the name of the database created for the application. Immutable. Defaults to
	// gitea.
	// +optional
	// +kubebuilder:default=gitea
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="database is immutable"
	Database string `json:"database,omitempty"`
	// User is the role that owns Database; its generated password is in the credentials Secret.
	// Immutable. Defaults to gitea.
	// +optional
	// +kubebuilder:default=gitea
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="user is immutable"
	User string `json:"user,omitempty"`
}

// PostgreSQLStatus is the observed state of a PostgreSQL.
type PostgreSQLStatus struct {
	kdagv1alpha1.Status `json:",inline"`
	// CredentialsSecretName is the Secret, in the PostgreSQL's namespace, with the keys "host",
	// "port", "user", "password" and "database" (the same keys as an external database Secret).
	// The password is generated once and never rotated by the operator.
	// +optional
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`
	// ServiceName is the Service, in the PostgreSQL's namespace, that clients connect to.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
}

// PostgreSQL is a single-instance PostgreSQL server: a StatefulSet with a persistent volume, a
// headless Service and a generated credentials Secret. A Gitea with a managed database creates
// one; it can also be created on its own.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gtpg,categories=kdag
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.status.serviceName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PostgreSQL struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired instance.
	// +required
	Spec PostgreSQLSpec `json:"spec"`
	// Status is written by the operator.
	// +optional
	Status PostgreSQLStatus `json:"status,omitempty"`
}

// PostgreSQLList is a list of PostgreSQL.
//
// +kubebuilder:object:root=true
type PostgreSQLList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PostgreSQL `json:"items"`
}
