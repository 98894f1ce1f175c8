package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults of the schema, repeated for controllers that fill an optional block the user left out
// (for example Gitea.spec.database.managed when only database.type is set). The CRD markers carry
// the same values; TestDefaults_MatchGoConstants keeps them in step.
const (
	// DefaultGiteaVersion is the Gitea release deployed when spec.version is not set: the current
	// official release, https://github.com/go-gitea/gitea/releases/tag/v1.27.3.
	DefaultGiteaVersion = "1.27.3"
	// DefaultGiteaImage is the official Gitea image repository; the tag is the version.
	DefaultGiteaImage = "docker.gitea.com/gitea"
	// DefaultPostgreSQLVersion is the PostgreSQL major version of a managed database.
	DefaultPostgreSQLVersion = "17"
	// DefaultPostgreSQLImage is the official PostgreSQL image repository (Docker Official Image).
	DefaultPostgreSQLImage = "docker.io/library/postgres"
	// DefaultValkeyVersion is the Valkey version of the cache.
	DefaultValkeyVersion = "8.1"
	// DefaultValkeyImage is the official Valkey image repository.
	DefaultValkeyImage = "docker.io/valkey/valkey"
	// DefaultStorageSize is the size of every volume the operator claims.
	DefaultStorageSize = "10Gi"
	// DefaultDatabaseName and DefaultDatabaseUser name the database and role a PostgreSQL creates.
	DefaultDatabaseName = "gitea"
	DefaultDatabaseUser = "gitea"
	// DefaultPostgreSQLPort is the port of a database when GiteaServer.spec.database.port is unset.
	DefaultPostgreSQLPort = 5432
	// DefaultMigrationTimeout bounds a GiteaServer's database migration Job.
	DefaultMigrationTimeout = "10m"
)

// Keys of the Secrets the API refers to. The operator reads these keys and nothing else.
const (
	// Keys of the external database Secret (Gitea.spec.database.external.secretRef) and of the
	// credentials Secret a PostgreSQL generates (PostgreSQL.status.credentialsSecretName).
	DatabaseSecretHostKey     = "host"
	DatabaseSecretPortKey     = "port"
	DatabaseSecretUserKey     = "user"
	DatabaseSecretPasswordKey = "password"
	DatabaseSecretDatabaseKey = "database"

	// Keys of the bootstrap administrator Secret (spec.admin.secretRef).
	AdminSecretUsernameKey = "username"
	AdminSecretPasswordKey = "password"
	AdminSecretEmailKey    = "email"
)

// StorageSpec is a persistent volume the operator claims for a component.
//
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="storage.storageClassName is immutable: the volume is already provisioned",fieldPath=".storageClassName"
type StorageSpec struct {
	// Size is the capacity requested for the volume, as a Kubernetes quantity ("10Gi"). It can
	// grow (if the storage class allows volume expansion) but never shrink.
	// +optional
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="storage.size must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || !quantity(string(self)).isLessThan(quantity(string(oldSelf)))",message="storage.size cannot shrink: a PersistentVolumeClaim can only grow"
	Size resource.Quantity `json:"size,omitzero"`
	// StorageClassName is the StorageClass of the volume. Unset uses the cluster's default class.
	// Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`
	// DeletionPolicy says what happens to the volume's claim, and so to its data, when the
	// component is deleted (with its Gitea, or on its own). Retain (the default) keeps the claim:
	// it is released from the deleted component, and a component of the same name created later
	// (a Gitea re-created under the same name in the same namespace) reuses it, data included.
	// Delete deletes the claim with the component; the data is lost unless the volume's
	// reclaim policy keeps it.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy StorageDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// StorageDeletionPolicy is what happens to a volume claim when its component is deleted.
//
// +kubebuilder:validation:Enum=Retain;Delete
type StorageDeletionPolicy string

const (
	// StorageRetain keeps the claim and its data when the component is deleted.
	StorageRetain StorageDeletionPolicy = "Retain"
	// StorageDelete deletes the claim with the component.
	StorageDelete StorageDeletionPolicy = "Delete"
)

// ServerStorageSpec is the Gitea server's data volume (repositories, attachments, LFS objects).
type ServerStorageSpec struct {
	StorageSpec `json:",inline"`
	// AccessMode of the volume. ReadWriteOnce suits one replica; more than one replica needs
	// ReadWriteMany (a storage class that supports it, such as NFS or CephFS), because every
	// replica mounts the same repositories.
	// +optional
	// +kubebuilder:default=ReadWriteOnce
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteMany
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage.accessMode is immutable: a claim's access modes cannot change once it is bound; to run several replicas, create the Gitea with ReadWriteMany from the start (and move the data)"
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`
}

// SecretReference names a Secret in the namespace of the object that refers to it.
type SecretReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// IngressSpec exposes the Gitea server through an Ingress.
type IngressSpec struct {
	// Host is the fully qualified host name users reach Gitea at, e.g. "git.example.com". It
	// also sets Gitea's ROOT_URL (https when TLSSecretName is set, http otherwise). Wildcards are
	// not allowed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Format=hostname
	Host string `json:"host"`
	// TLSSecretName is a Secret of type kubernetes.io/tls in the same namespace holding the
	// certificate for Host. Unset serves plain HTTP.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TLSSecretName string `json:"tlsSecretName,omitempty"`
	// ClassName is the IngressClass that serves the Ingress. Unset uses the cluster's default
	// IngressClass.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClassName *string `json:"className,omitempty"`
}

// AdminSpec asks for a bootstrap administrator account.
type AdminSpec struct {
	// SecretRef names a Secret with the keys "username", "password" and "email". The account is
	// created once, when it does not exist; later changes to the Secret are not applied (change
	// the password in Gitea instead).
	// +required
	SecretRef SecretReference `json:"secretRef"`
}

// PodOverrides are escape hatches applied to the Gitea server pods.
type PodOverrides struct {
	// ExtraEnv is appended to the server container's environment, after the operator's own
	// variables, so it can override them. Gitea reads any app.ini setting from variables named
	// GITEA__<section>__<KEY>, e.g. GITEA__service__DISABLE_REGISTRATION=true.
	// Each value is at most 4096 characters (with podAnnotations, the objects built from them stay
	// under the API server's size limit): mount larger settings from a ConfigMap or Secret.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.value) || size(e.value) <= 4096)",message="extraEnv values must be at most 4096 characters: mount larger settings from a ConfigMap or Secret (valueFrom)"
	ExtraEnv []corev1.EnvVar `json:"extraEnv,omitempty"`
	// NodeSelector constrains the server pods to nodes with these labels.
	// +optional
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="nodeSelector values are node label values: at most 63 characters"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the server pods schedule onto nodes with matching taints.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// PodAnnotations are added to the server pods' annotations (not to the workload's). All of a
	// pod's annotations together must stay under 256 KiB, which the pod's workload enforces.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 4096)",message="podAnnotations values must be at most 4096 characters: a pod's annotations together cannot exceed 256 KiB"
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
}
