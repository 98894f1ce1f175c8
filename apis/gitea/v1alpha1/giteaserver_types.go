package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// GiteaServerSpec is the Gitea server: workload, storage, configuration and the database
// migration gate. A Gitea fills it from its own spec and from its children's outputs (the
// PostgreSQL's Service and credentials Secret, the Valkey's Service).
//
// +kubebuilder:validation:XValidation:rule="self.replicas <= 1 || has(self.cache)",message="replicas > 1 requires cache.address (sessions and locks are shared through Valkey)",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="self.replicas <= 1 || self.storage.accessMode == 'ReadWriteMany'",message="replicas > 1 requires storage.accessMode: ReadWriteMany",fieldPath=".replicas"
type GiteaServerSpec struct {
	// Version is the Gitea release to run, "major.minor.patch" (or "major.minor"); it is the
	// image tag. A new version first runs the database migration (see status.migration), then
	// rolls the server. It cannot move backwards, but as far as status.version (the version the
	// server runs) while no newer version's migration has succeeded or runs (status.migration).
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^\d+\.\d+(\.\d+)?$`
	Version string `json:"version"`
	// Image is the Gitea image repository, without tag or digest: the tag is Version. Defaults
	// to docker.gitea.com/gitea.
	// +optional
	// +kubebuilder:default="docker.gitea.com/gitea"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.substring(self.lastIndexOf('/') + 1).contains(':')",message="image must be a repository without tag or digest: the tag is spec.version"
	Image string `json:"image,omitempty"`
	// Replicas is the number of server pods. More than one needs Cache and a ReadWriteMany
	// storage.accessMode. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Replicas int32 `json:"replicas,omitempty"`
	// Resources of the server container (the migration Job uses the same). Defaults to requests
	// of 100m CPU and 256Mi memory when the field is absent.
	// +optional
	// +kubebuilder:default={requests: {cpu: "100m", memory: "256Mi"}}
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !has(self.requests) || ['cpu', 'memory'].all(r, !(r in self.limits) || !(r in self.requests) || !isQuantity(string(self.limits[r])) || !isQuantity(string(self.requests[r])) || !quantity(string(self.limits[r])).isLessThan(quantity(string(self.requests[r]))))",message="resources.limits must not be below resources.requests (cpu, memory): the API server refuses such a container"
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`
	// Storage is the server's data volume: repositories, attachments, LFS objects.
	// +optional
	// +kubebuilder:default={}
	Storage ServerStorageSpec `json:"storage,omitzero"`
	// Database is the PostgreSQL database the server connects to.
	// +required
	Database ServerDatabaseSpec `json:"database"`
	// Cache is the Valkey the server uses for its cache, sessions and locks. Unset, they are kept
	// in memory, which only works with one replica.
	// +optional
	Cache *ServerCacheSpec `json:"cache,omitempty"`
	// Ingress exposes the server outside the cluster.
	// +optional
	Ingress *IngressSpec `json:"ingress,omitempty"`
	// Admin creates a bootstrap administrator account from a Secret.
	// +optional
	Admin *AdminSpec `json:"admin,omitempty"`
	// MigrationTimeout bounds the database migration of a new version, as a Go duration ("10m",
	// "1h30m"), at least 1m. A migration still running at the deadline is TimedOut and the server
	// is not rolled; the old version keeps serving. Defaults to 10m.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="migrationTimeout must be at least 1m"
	MigrationTimeout metav1.Duration `json:"migrationTimeout,omitzero"`

	PodOverrides `json:",inline"`
}

// ServerDatabaseSpec is how the server reaches its database. The credentials stay in a Secret.
type ServerDatabaseSpec struct {
	// SecretRef names a Secret in the server's namespace with every connection detail: the keys
	// host, port, user, password and database (DatabaseSecret*Key). A PostgreSQL's credentials
	// Secret and an external database's Secret have this shape, so the server needs nothing
	// else: the connection comes from the database component's output, not from a copy of it.
	// +required
	SecretRef SecretReference `json:"secretRef"`
}

// ServerCacheSpec is how the server reaches its Valkey.
type ServerCacheSpec struct {
	// Address is "host:port" of the Valkey Service, e.g. "demo-valkey.default.svc:6379".
	// +required
	// +kubebuilder:validation:MaxLength=260
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$`
	Address string `json:"address"`
}

// MigrationState is the state of a database migration.
//
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;TimedOut
type MigrationState string

const (
	// MigrationPending means the new version's migration has not started (it waits for the database).
	MigrationPending MigrationState = "Pending"
	// MigrationRunning means the migration Job runs; the server keeps the previous version.
	MigrationRunning MigrationState = "Running"
	// MigrationSucceeded means the database is at Version; the server runs or rolls to it.
	MigrationSucceeded MigrationState = "Succeeded"
	// MigrationFailed means the migration Job failed; the server keeps the previous version. See
	// the message and the Job's logs.
	MigrationFailed MigrationState = "Failed"
	// MigrationTimedOut means the migration did not finish before its deadline.
	MigrationTimedOut MigrationState = "TimedOut"
)

// MigrationStatus is the database migration of one Gitea version: a blocking operation the server
// rollout waits for.
type MigrationStatus struct {
	// Version is the Gitea version whose migration this is.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version"`
	// State of the migration.
	// +required
	State MigrationState `json:"state"`
	// StartedAt is when the migration Job started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// Deadline is StartedAt plus spec.migrationTimeout: a migration still running then is
	// TimedOut.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// Message says why the migration failed or what it waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// GiteaServerStatus is the observed state of a GiteaServer.
type GiteaServerStatus struct {
	kdagv1alpha1.Status `json:",inline"`
	// Version is the Gitea version the server runs: its migration succeeded and the rollout
	// finished. It lags spec.version during an upgrade.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Version string `json:"version,omitempty"`
	// URL is where the server is served: the Ingress URL when spec.ingress is set, the
	// in-cluster Service URL otherwise.
	// +optional
	URL string `json:"url,omitempty"`
	// Migration is the database migration of spec.version, or of the last version migrated.
	// +optional
	Migration *MigrationStatus `json:"migration,omitempty"`
}

// GiteaServer is the Gitea server: generated secrets, app.ini, a migration Job per version that
// must complete before the server rolls, the server workload with its volume, a Service and an
// optional Ingress. A Gitea creates one.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gtsrv,categories=kdag
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Migration",type=string,JSONPath=`.status.migration.state`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!isSemver(self.spec.version, true) || !isSemver(oldSelf.spec.version, true) || semver(self.spec.version, true).compareTo(semver(oldSelf.spec.version, true)) >= 0 || (has(self.status) && has(self.status.version) && isSemver(self.status.version, true) && semver(self.spec.version, true).compareTo(semver(self.status.version, true)) >= 0 && !(has(self.status.migration) && (self.status.migration.state == 'Succeeded' || self.status.migration.state == 'Running') && isSemver(self.status.migration.version, true) && semver(self.spec.version, true).compareTo(semver(self.status.migration.version, true)) < 0))",message="version cannot move backwards: downgrades are not supported by Gitea's database migrations (spec.version may go back only as far as status.version, the deployed version, while no newer version's migration has succeeded or is running: wait until it has failed or timed out)",fieldPath=".spec.version"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.database) || self.spec.database.secretRef.name != self.metadata.name + '-secrets'",message="spec.database.secretRef must not name <name>-secrets: the operator generates that Secret for the server; rename your Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.admin) || self.spec.admin.secretRef.name != self.metadata.name + '-secrets'",message="spec.admin.secretRef must not name <name>-secrets: the operator generates that Secret for the server; rename your Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.ingress) || !has(self.spec.ingress.tlsSecretName) || self.spec.ingress.tlsSecretName != self.metadata.name + '-secrets'",message="spec.ingress.tlsSecretName must not name <name>-secrets: the operator generates that Secret for the server; rename your Secret"
type GiteaServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired server.
	// +required
	Spec GiteaServerSpec `json:"spec"`
	// Status is written by the operator.
	// +optional
	Status GiteaServerStatus `json:"status,omitempty"`
}

// GiteaServerList is a list of GiteaServer.
//
// +kubebuilder:object:root=true
type GiteaServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GiteaServer `json:"items"`
}
