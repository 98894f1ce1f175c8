package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the reference operator.
const GroupName = "gitea.kdag.dev"

// Kinds of this API version, for GroupVersion.WithKind.
const (
	GiteaKind       = "Gitea"
	GiteaServerKind = "GiteaServer"
	PostgreSQLKind  = "PostgreSQL"
	ValkeyKind      = "Valkey"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds every kind of this package (and its list) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the group-qualified resource for an unqualified one, e.g. "giteas".
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Gitea{}, &GiteaList{},
		&GiteaServer{}, &GiteaServerList{},
		&PostgreSQL{}, &PostgreSQLList{},
		&Valkey{}, &ValkeyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
