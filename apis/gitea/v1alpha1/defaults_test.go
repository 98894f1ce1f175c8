package v1alpha1_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

func checkQuantity(t *testing.T, field string, got resource.Quantity, want string) {
	t.Helper()
	if got.Cmp(resource.MustParse(want)) != 0 {
		t.Errorf("%s = %s, want %s", field, got.String(), want)
	}
}

func checkRequests(t *testing.T, field string, got corev1.ResourceRequirements, cpu, memory string) {
	t.Helper()
	checkQuantity(t, field+".requests.cpu", got.Requests[corev1.ResourceCPU], cpu)
	checkQuantity(t, field+".requests.memory", got.Requests[corev1.ResourceMemory], memory)
	if len(got.Limits) != 0 {
		t.Errorf("%s.limits = %v, want none by default", field, got.Limits)
	}
}

func checkStorage(t *testing.T, field string, got v1alpha1.StorageSpec) {
	t.Helper()
	checkQuantity(t, field+".size", got.Size, v1alpha1.DefaultStorageSize)
	if got.StorageClassName != nil {
		t.Errorf("%s.storageClassName = %q, want unset (the cluster's default class)", field, *got.StorageClassName)
	}
}

// The minimal sample (what `make demo` deploys) reads back with every schema default filled, and
// the defaults are the Default* constants of the package.
func TestDefaults_MinimalSampleMatchesGoConstants(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	docs := readDocuments(t, filepath.Join(samplesDir, "gitea.yaml"))
	if len(docs) != 1 || docs[0].GetKind() != v1alpha1.GiteaKind {
		t.Fatalf("gitea.yaml must hold exactly one Gitea, has %d documents", len(docs))
	}
	docs[0].SetNamespace(ns)
	if err := env.Client.Create(ctx, docs[0], strict); err != nil {
		t.Fatalf("create minimal sample: %v", err)
	}
	g := &v1alpha1.Gitea{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(docs[0]), g); err != nil {
		t.Fatal(err)
	}
	s := g.Spec
	if g.Name != "demo" {
		t.Errorf("name = %q, want demo (make demo waits for it)", g.Name)
	}
	if s.Version != v1alpha1.DefaultGiteaVersion || s.Image != v1alpha1.DefaultGiteaImage {
		t.Errorf("version, image = %q, %q; want %q, %q", s.Version, s.Image, v1alpha1.DefaultGiteaVersion, v1alpha1.DefaultGiteaImage)
	}
	if s.Replicas != 1 {
		t.Errorf("replicas = %d, want 1", s.Replicas)
	}
	checkRequests(t, "resources", s.Resources, "100m", "256Mi")
	checkStorage(t, "storage", s.Storage.StorageSpec)
	if s.Storage.AccessMode != corev1.ReadWriteOnce {
		t.Errorf("storage.accessMode = %q, want ReadWriteOnce", s.Storage.AccessMode)
	}

	if s.Database.Type != v1alpha1.DatabaseManaged || s.Database.External != nil {
		t.Errorf("database = %+v, want type managed without external", s.Database)
	}
	if m := s.Database.Managed; m == nil {
		t.Error("database.managed is not defaulted")
	} else {
		if m.Version != v1alpha1.DefaultPostgreSQLVersion || m.Image != v1alpha1.DefaultPostgreSQLImage {
			t.Errorf("database.managed version, image = %q, %q; want %q, %q", m.Version, m.Image, v1alpha1.DefaultPostgreSQLVersion, v1alpha1.DefaultPostgreSQLImage)
		}
		checkStorage(t, "database.managed.storage", m.Storage)
		checkRequests(t, "database.managed.resources", m.Resources, "100m", "256Mi")
	}

	c := s.Cache
	if c.Enabled == nil || !*c.Enabled || c.Version != v1alpha1.DefaultValkeyVersion || c.Image != v1alpha1.DefaultValkeyImage {
		t.Errorf("cache = %+v, want enabled, %q, %q", c, v1alpha1.DefaultValkeyVersion, v1alpha1.DefaultValkeyImage)
	}
	checkRequests(t, "cache.resources", c.Resources, "50m", "64Mi")

	if s.Ingress != nil || s.Admin != nil || s.ExtraEnv != nil || s.NodeSelector != nil || s.Tolerations != nil || s.PodAnnotations != nil {
		t.Errorf("optional blocks must stay unset: %+v", s)
	}
}

// A database.type without a managed block keeps managed unset: the controller falls back to the
// Default* constants.
func TestDefaults_ManagedBlockOnlyWhenDatabaseAbsent(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	g := &v1alpha1.Gitea{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typed"},
		Spec:       v1alpha1.GiteaSpec{Database: v1alpha1.DatabaseSpec{Type: v1alpha1.DatabaseManaged}},
	}
	if err := env.Client.Create(ctx, g, strict); err != nil {
		t.Fatalf("create: %v", err)
	}
	if g.Spec.Database.Managed != nil {
		t.Errorf("database.managed = %+v, want unset when the user wrote the database block", g.Spec.Database.Managed)
	}
	// Zero values of the Go types are omitted, so a typed client gets the schema defaults too.
	if g.Spec.Version != v1alpha1.DefaultGiteaVersion || g.Spec.Replicas != 1 || !g.Spec.Cache.IsEnabled() {
		t.Errorf("typed create did not get the defaults: %+v", g.Spec)
	}
	checkStorage(t, "storage", g.Spec.Storage.StorageSpec)
}

// The child kinds, created from Go values with only their required fields, get their defaults.
func TestDefaults_ChildKinds(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()

	pg := &v1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}
	if err := env.Client.Create(ctx, pg, strict); err != nil {
		t.Fatalf("create PostgreSQL: %v", err)
	}
	if pg.Spec.Version != v1alpha1.DefaultPostgreSQLVersion || pg.Spec.Image != v1alpha1.DefaultPostgreSQLImage ||
		pg.Spec.Database != v1alpha1.DefaultDatabaseName || pg.Spec.User != v1alpha1.DefaultDatabaseUser {
		t.Errorf("PostgreSQL defaults: %+v", pg.Spec)
	}
	checkStorage(t, "postgresql.storage", pg.Spec.Storage)
	checkRequests(t, "postgresql.resources", pg.Spec.Resources, "100m", "256Mi")

	vk := &v1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}
	if err := env.Client.Create(ctx, vk, strict); err != nil {
		t.Fatalf("create Valkey: %v", err)
	}
	if vk.Spec.Version != v1alpha1.DefaultValkeyVersion || vk.Spec.Image != v1alpha1.DefaultValkeyImage || vk.Spec.Config != nil {
		t.Errorf("Valkey defaults: %+v", vk.Spec)
	}
	checkRequests(t, "valkey.resources", vk.Spec.Resources, "50m", "64Mi")

	srv := &v1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server"},
		Spec: v1alpha1.GiteaServerSpec{
			Version: v1alpha1.DefaultGiteaVersion,
			Database: v1alpha1.ServerDatabaseSpec{
				SecretRef: v1alpha1.SecretReference{Name: "db-credentials"},
			},
		},
	}
	if err := env.Client.Create(ctx, srv, strict); err != nil {
		t.Fatalf("create GiteaServer: %v", err)
	}
	s := srv.Spec
	if s.Image != v1alpha1.DefaultGiteaImage || s.Replicas != 1 {
		t.Errorf("GiteaServer defaults: %+v", s)
	}
	if want, _ := time.ParseDuration(v1alpha1.DefaultMigrationTimeout); s.MigrationTimeout.Duration != want {
		t.Errorf("migrationTimeout = %v, want %v", s.MigrationTimeout.Duration, want)
	}
	checkStorage(t, "giteaserver.storage", s.Storage.StorageSpec)
	if s.Storage.AccessMode != corev1.ReadWriteOnce {
		t.Errorf("giteaserver.storage.accessMode = %q, want ReadWriteOnce", s.Storage.AccessMode)
	}
	checkRequests(t, "giteaserver.resources", s.Resources, "100m", "256Mi")
}

// A typed client that turns the cache off gets it off: false is sent, not left out as the zero
// value of an otherwise empty CacheSpec and turned back on by the schema's default.
func TestDefaults_TypedClientCanDisableTheCache(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		enabled *bool
		want    bool
	}{
		{"off", ptr.To(false), false},
		{"on", ptr.To(true), true},
		{"unset", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &v1alpha1.Gitea{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-" + tt.name},
				Spec:       v1alpha1.GiteaSpec{Cache: v1alpha1.CacheSpec{Enabled: tt.enabled}},
			}
			if err := env.Client.Create(ctx, g, strict); err != nil {
				t.Fatalf("create: %v", err)
			}
			if g.Spec.Cache.Enabled == nil {
				t.Fatalf("cache.enabled unset after create, want the schema's default or the client's value")
			}
			if got := *g.Spec.Cache.Enabled; got != tt.want || g.Spec.Cache.IsEnabled() != tt.want {
				t.Errorf("cache.enabled = %v (IsEnabled %v), want %v", got, g.Spec.Cache.IsEnabled(), tt.want)
			}
		})
	}
}
