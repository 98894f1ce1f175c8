package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// DatabaseType says where Gitea's database comes from.
//
// +kubebuilder:validation:Enum=managed;external
type DatabaseType string

const (
	// DatabaseManaged means the operator runs a PostgreSQL child for this Gitea.
	DatabaseManaged DatabaseType = "managed"
	// DatabaseExternal means Gitea connects to an existing PostgreSQL given by a Secret.
	DatabaseExternal DatabaseType = "external"
)

// GiteaSpec is the desired Gitea installation.
//
// +kubebuilder:validation:XValidation:rule="self.replicas <= 1 || self.cache.enabled",message="replicas > 1 requires cache.enabled: true (sessions and locks are shared through Valkey)",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="self.replicas <= 1 || self.storage.accessMode == 'ReadWriteMany'",message="replicas > 1 requires storage.accessMode: ReadWriteMany",fieldPath=".replicas"
type GiteaSpec struct {
	// Version is the Gitea release to run, "major.minor.patch" (or "major.minor"); it is the
	// image tag. Changing it upgrades Gitea: the operator runs the database migration of the new
	// version to completion before it rolls the server. It cannot move backwards, because Gitea's
	// database migrations are one-way: it may go back only as far as status.version (the deployed
	// version) while a newer version's migration has not finished (a rollback of an upgrade that
	// failed). Defaults to 1.27.3.
	// +optional
	// +kubebuilder:default="1.27.3"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\d+\.\d+(\.\d+)?$`
	Version string `json:"version,omitempty"`
	// Image is the Gitea image repository, without tag or digest: the tag is Version. Set it to
	// use a mirror. Defaults to docker.gitea.com/gitea.
	// +optional
	// +kubebuilder:default="docker.gitea.com/gitea"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.substring(self.lastIndexOf('/') + 1).contains(':')",message="image must be a repository without tag or digest: the tag is spec.version"
	Image string `json:"image,omitempty"`
	// Replicas is the number of Gitea server pods. More than one needs the cache enabled and a
	// ReadWriteMany storage.accessMode. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Replicas int32 `json:"replicas,omitempty"`
	// Resources of the Gitea server container. Defaults to requests of 100m CPU and 256Mi memory
	// when the field is absent.
	// +optional
	// +kubebuilder:default={requests: {cpu: "100m", memory: "256Mi"}}
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !has(self.requests) || ['cpu', 'memory'].all(r, !(r in self.limits) || !(r in self.requests) || !isQuantity(string(self.limits[r])) || !isQuantity(string(self.requests[r])) || !quantity(string(self.limits[r])).isLessThan(quantity(string(self.requests[r]))))",message="resources.limits must not be below resources.requests (cpu, memory): the API server refuses such a container"
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`
	// Storage is the server's data volume: repositories, attachments, LFS objects.
	// +optional
	// +kubebuilder:default={}
	Storage ServerStorageSpec `json:"storage,omitzero"`
	// Database is Gitea's PostgreSQL database: managed by the operator (default) or external.
	// +optional
	// +kubebuilder:default={type: managed, managed: {}}
	Database DatabaseSpec `json:"database,omitzero"`
	// Cache is the Valkey instance Gitea uses for its cache, sessions and locks.
	// +optional
	// +kubebuilder:default={}
	Cache CacheSpec `json:"cache,omitzero"`
	// Ingress exposes Gitea outside the cluster. Unset: Gitea is reachable only through its
	// in-cluster Service (status.url).
	// +optional
	Ingress *IngressSpec `json:"ingress,omitempty"`
	// Admin creates a bootstrap administrator account from a Secret. Unset: the first user to
	// register becomes the administrator, as in a plain Gitea installation.
	// +optional
	Admin *AdminSpec `json:"admin,omitempty"`

	PodOverrides `json:",inline"`
}

// DatabaseSpec selects Gitea's database.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'external' || has(self.external)",message="database.external.secretRef is required when database.type is external"
// +kubebuilder:validation:XValidation:rule="self.type != 'managed' || !has(self.external)",message="database.external must not be set when database.type is managed"
// +kubebuilder:validation:XValidation:rule="self.type != 'external' || !has(self.managed)",message="database.managed must not be set when database.type is external"
type DatabaseSpec struct {
	// Type is "managed" (the operator runs PostgreSQL for this Gitea) or "external" (Gitea
	// connects to the database described by external.secretRef). Defaults to managed.
	// +optional
	// +kubebuilder:default=managed
	Type DatabaseType `json:"type,omitempty"`
	// Managed configures the operator's PostgreSQL; only with type managed. When absent, the
	// Default* values of this package apply.
	// +optional
	Managed *ManagedDatabaseSpec `json:"managed,omitempty"`
	// External points to an existing PostgreSQL; required with type external, forbidden
	// otherwise.
	// +optional
	External *ExternalDatabaseSpec `json:"external,omitempty"`
}

// ManagedDatabaseSpec is the PostgreSQL instance the operator runs for a Gitea. The PostgreSQL
// kind embeds it.
type ManagedDatabaseSpec struct {
	// Version is the PostgreSQL version, an image tag of the official image: a major version
	// ("17") or a minor release ("17.6"). The major version cannot change once set: a major
	// upgrade needs pg_upgrade, which the operator does not run. Defaults to 17.
	// +optional
	// +kubebuilder:default="17"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+){0,2}$`
	// +kubebuilder:validation:XValidation:rule="!isSemver(self, true) || !isSemver(oldSelf, true) || semver(self, true).major() == semver(oldSelf, true).major()",message="the PostgreSQL major version cannot change: a major upgrade needs pg_upgrade, which the operator does not run"
	Version string `json:"version,omitempty"`
	// Image is the PostgreSQL image repository, without tag or digest: the tag is Version.
	// Defaults to docker.io/library/postgres.
	// +optional
	// +kubebuilder:default="docker.io/library/postgres"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.substring(self.lastIndexOf('/') + 1).contains(':')",message="image must be a repository without tag or digest: the tag is version"
	Image string `json:"image,omitempty"`
	// Storage is the database's data volume.
	// +optional
	// +kubebuilder:default={}
	Storage StorageSpec `json:"storage,omitzero"`
	// Resources of the PostgreSQL container. Defaults to requests of 100m CPU and 256Mi memory
	// when the field is absent.
	// +optional
	// +kubebuilder:default={requests: {cpu: "100m", memory: "256Mi"}}
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !has(self.requests) || ['cpu', 'memory'].all(r, !(r in self.limits) || !(r in self.requests) || !isQuantity(string(self.limits[r])) || !isQuantity(string(self.requests[r])) || !quantity(string(self.limits[r])).isLessThan(quantity(string(self.requests[r]))))",message="resources.limits must not be below resources.requests (cpu, memory): the API server refuses such a container"
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`
}

// ExternalDatabaseSpec points Gitea at an existing PostgreSQL database.
type ExternalDatabaseSpec struct {
	// SecretRef names a Secret in the Gitea's namespace with the keys "host", "port", "user",
	// "password" and "database". Gitea connects with these settings; the operator does not
	// create the database or the role.
	// +required
	SecretRef SecretReference `json:"secretRef"`
}

// CacheSpec configures the Valkey instance Gitea uses for its cache, sessions and locks.
type CacheSpec struct {
	// Enabled runs a Valkey child and points Gitea's cache, session and global lock at it.
	// Disabled, Gitea keeps them in memory, which only works with one replica. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
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
}

// IsEnabled reports whether the Gitea runs a Valkey cache: Enabled, or true when it is unset (the
// schema's default, for an object not yet defaulted by the API server).
//
// Enabled is a pointer, as the API conventions ask of an optional field with a default: with a
// plain bool, a Go client's false would be the zero value, left out of the request with the rest
// of an otherwise empty CacheSpec, and the schema's default would turn the cache back on.
func (c CacheSpec) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// GiteaStatus is the observed state of a Gitea.
type GiteaStatus struct {
	kdagv1alpha1.Status `json:",inline"`
	// Version is the Gitea version currently deployed: its migration has completed and the
	// server runs it. It lags spec.version during an upgrade.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version,omitempty"`
	// URL is where Gitea is served: the Ingress URL when spec.ingress is set, the in-cluster
	// Service URL otherwise.
	// +optional
	URL string `json:"url,omitempty"`
}

// Gitea is a Gitea installation: the server, its PostgreSQL database (managed or external) and
// its Valkey cache. Its controller creates PostgreSQL, Valkey and GiteaServer children and
// reports them in status.graph.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=giteas,singular=gitea,shortName=gt,categories=kdag
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Deployed",type=string,JSONPath=`.status.version`,priority=1
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(oldSelf.spec) || !has(self.spec.version) || !has(oldSelf.spec.version) || !isSemver(self.spec.version, true) || !isSemver(oldSelf.spec.version, true) || semver(self.spec.version, true).compareTo(semver(oldSelf.spec.version, true)) >= 0 || (has(self.status) && has(self.status.version) && isSemver(self.status.version, true) && semver(self.spec.version, true).compareTo(semver(self.status.version, true)) >= 0)",message="version cannot move backwards: downgrades are not supported by Gitea's database migrations (spec.version may go back only as far as status.version, the deployed version, while a newer version's migration has not finished)",fieldPath=".spec.version"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.database) || !has(self.spec.database.external) || self.spec.database.external.secretRef.name != self.metadata.name + '-secrets'",message="spec.database.external.secretRef must not name <name>-secrets: the operator generates that Secret for the server; rename your Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.admin) || self.spec.admin.secretRef.name != self.metadata.name + '-secrets'",message="spec.admin.secretRef must not name <name>-secrets: the operator generates that Secret for the server; rename your Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.admin) || (has(self.spec.database) && has(self.spec.database.external)) || self.spec.admin.secretRef.name != self.metadata.name + '-postgresql-credentials'",message="spec.admin.secretRef must not name <name>-postgresql-credentials: the operator generates that Secret for the managed database; rename your Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.ingress) || !has(self.spec.ingress.tlsSecretName) || self.spec.ingress.tlsSecretName != self.metadata.name + '-secrets'",message="spec.ingress.tlsSecretName must not name <name>-secrets: the operator generates that Secret for the server; rename your Secret"
type Gitea struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired installation.
	// +required
	Spec GiteaSpec `json:"spec"`
	// Status is written by the operator.
	// +optional
	Status GiteaStatus `json:"status,omitempty"`
}

// GiteaList is a list of Gitea.
//
// +kubebuilder:object:root=true
type GiteaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gitea `json:"items"`
}
