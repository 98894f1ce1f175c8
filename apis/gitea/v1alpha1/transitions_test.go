package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want Invalid with %q, got %v", want, err)
	}
}

// A forward upgrade is accepted (patch, minor, and a "major.minor" that normalizes higher);
// any step back is refused with the downgrade message.
func TestGitea_VersionOnlyMovesForward(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	g := &v1alpha1.Gitea{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upgrade"},
		Spec:       v1alpha1.GiteaSpec{Version: "1.25.5"},
	}
	if err := env.Client.Create(ctx, g, strict); err != nil {
		t.Fatalf("create at 1.25.5: %v", err)
	}
	for _, v := range []string{"1.25.5", "1.26", "1.26.4", "1.27.3", "1.28"} {
		g.Spec.Version = v
		if err := env.Client.Update(ctx, g, strict); err != nil {
			t.Fatalf("upgrade to %s: %v", v, err)
		}
	}
	for _, v := range []string{"1.27.3", "1.9.0", "1.27"} {
		g.Spec.Version = v
		wantInvalid(t, env.Client.Update(ctx, g, strict), "version cannot move backwards: downgrades are not supported by Gitea's database migrations")
	}
	// Other changes to a Gitea at 1.28 are not caught by the version rule.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Storage.Size = resource.MustParse("20Gi")
	if err := env.Client.Update(ctx, g, strict); err != nil {
		t.Fatalf("grow storage: %v", err)
	}
}

func TestGiteaServer_TransitionRules(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	srv := &v1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server"},
		Spec: v1alpha1.GiteaServerSpec{
			Version: "1.26.4",
			Storage: v1alpha1.ServerStorageSpec{StorageSpec: v1alpha1.StorageSpec{StorageClassName: ptr.To("standard")}},
			Database: v1alpha1.ServerDatabaseSpec{
				SecretRef: v1alpha1.SecretReference{Name: "db-credentials"},
			},
		},
	}
	if err := env.Client.Create(ctx, srv, strict); err != nil {
		t.Fatalf("create: %v", err)
	}
	srv.Spec.Version = "1.27.3"
	if err := env.Client.Update(ctx, srv, strict); err != nil {
		t.Fatalf("upgrade: %v", err)
	}

	down := srv.DeepCopy()
	down.Spec.Version = "1.26.4"
	wantInvalid(t, env.Client.Update(ctx, down, strict), "version cannot move backwards")

	class := srv.DeepCopy()
	class.Spec.Storage.StorageClassName = ptr.To("fast")
	wantInvalid(t, env.Client.Update(ctx, class, strict), "spec.storage.storageClassName: Invalid value")

	unset := srv.DeepCopy()
	unset.Spec.Storage.StorageClassName = nil
	wantInvalid(t, env.Client.Update(ctx, unset, strict), "storage.storageClassName is immutable")

	// A claim's access modes cannot change once bound: refused at admission (issue 20).
	mode := srv.DeepCopy()
	mode.Spec.Storage.AccessMode = "ReadWriteMany"
	wantInvalid(t, env.Client.Update(ctx, mode, strict), "storage.accessMode is immutable")

	// Scaling out needs ReadWriteMany from the start, and a cache.
	rwx := &v1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rwx"},
		Spec: v1alpha1.GiteaServerSpec{
			Version:  "1.27.3",
			Storage:  v1alpha1.ServerStorageSpec{AccessMode: "ReadWriteMany"},
			Database: v1alpha1.ServerDatabaseSpec{SecretRef: v1alpha1.SecretReference{Name: "db-credentials"}},
		},
	}
	if err := env.Client.Create(ctx, rwx, strict); err != nil {
		t.Fatalf("create with ReadWriteMany: %v", err)
	}
	scaled := rwx.DeepCopy()
	scaled.Spec.Replicas = 2
	wantInvalid(t, env.Client.Update(ctx, scaled, strict), "replicas > 1 requires cache.address")
	scaled.Spec.Cache = &v1alpha1.ServerCacheSpec{Address: "cache.default.svc:6379"}
	if err := env.Client.Update(ctx, scaled, strict); err != nil {
		t.Fatalf("scale out with a cache and ReadWriteMany: %v", err)
	}

	short := scaled.DeepCopy()
	short.Spec.MigrationTimeout = metav1.Duration{Duration: 30 * time.Second}
	wantInvalid(t, env.Client.Update(ctx, short, strict), "migrationTimeout must be at least 1m")
}

func TestPostgreSQL_TransitionRules(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	pg := &v1alpha1.PostgreSQL{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       v1alpha1.PostgreSQLSpec{ManagedDatabaseSpec: v1alpha1.ManagedDatabaseSpec{Version: "16"}},
	}
	if err := env.Client.Create(ctx, pg, strict); err != nil {
		t.Fatalf("create: %v", err)
	}
	pg.Spec.Version = "16.10"
	if err := env.Client.Update(ctx, pg, strict); err != nil {
		t.Fatalf("minor update: %v", err)
	}
	for name, mutate := range map[string]func(*v1alpha1.PostgreSQL){
		"the PostgreSQL major version cannot change": func(p *v1alpha1.PostgreSQL) { p.Spec.Version = "17" },
		"database is immutable":                      func(p *v1alpha1.PostgreSQL) { p.Spec.Database = "other" },
		"user is immutable":                          func(p *v1alpha1.PostgreSQL) { p.Spec.User = "other" },
		"storage.size cannot shrink":                 func(p *v1alpha1.PostgreSQL) { p.Spec.Storage.Size = resource.MustParse("5Gi") },
	} {
		changed := pg.DeepCopy()
		mutate(changed)
		wantInvalid(t, env.Client.Update(ctx, changed, strict), name)
	}
}

func TestValkey_ConfigRejectsOperatorOwnedKeys(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	vk := &v1alpha1.Valkey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec:       v1alpha1.ValkeySpec{Config: map[string]v1alpha1.ValkeyConfigValue{"maxmemory": "128mb", "port": "7000"}},
	}
	wantInvalid(t, env.Client.Create(ctx, vk, strict), "config must not set port")
	delete(vk.Spec.Config, "port")
	if err := env.Client.Create(ctx, vk, strict); err != nil {
		t.Fatalf("create with maxmemory: %v", err)
	}
}

// The status subresource takes what the controllers write: kdag's block and each kind's outputs.
func TestStatus_SubresourceAcceptsOutputs(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	kdag := func(gen int64) kdagv1alpha1.Status {
		st := kdagv1alpha1.Status{
			ObservedGeneration: gen,
			OperatorVersion:    "test",
			Graph: &kdagv1alpha1.GraphSummary{Total: 3, Ready: 2, Waiting: 1, NotReady: []kdagv1alpha1.NodeStatus{
				{Kind: "Job", Namespace: ns, Name: "migrate", State: kdagv1alpha1.NodeWaiting, Message: "running"},
			}},
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: kdagv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Waiting", Message: "1 of 3 nodes waiting",
			ObservedGeneration: gen,
		})
		return st
	}

	g := &v1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}
	srv := &v1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-server"},
		Spec: v1alpha1.GiteaServerSpec{Version: "1.27.3", Database: v1alpha1.ServerDatabaseSpec{
			SecretRef: v1alpha1.SecretReference{Name: "db"},
		}},
	}
	pg := &v1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-db"}}
	vk := &v1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-cache"}}
	for _, o := range []client.Object{g, srv, pg, vk} {
		if err := env.Client.Create(ctx, o, strict); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}

	now := metav1.NewTime(time.Now().Truncate(time.Second))
	g.Status = v1alpha1.GiteaStatus{Status: kdag(g.Generation), Version: "1.27.3", URL: "http://g-server." + ns + ".svc:3000"}
	srv.Status = v1alpha1.GiteaServerStatus{Status: kdag(srv.Generation), Version: "1.26.4", Migration: &v1alpha1.MigrationStatus{
		Version: "1.27.3", State: v1alpha1.MigrationRunning, StartedAt: &now,
		Deadline: ptr.To(metav1.NewTime(now.Add(srv.Spec.MigrationTimeout.Duration))),
	}}
	pg.Status = v1alpha1.PostgreSQLStatus{Status: kdag(pg.Generation), CredentialsSecretName: "g-db-credentials", ServiceName: "g-db"}
	vk.Status = v1alpha1.ValkeyStatus{Status: kdag(vk.Generation), ServiceName: "g-cache"}
	for _, o := range []client.Object{g, srv, pg, vk} {
		if err := env.Client.Status().Update(ctx, o); err != nil {
			t.Fatalf("update status of %T: %v", o, err)
		}
	}

	got := &v1alpha1.GiteaServer{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(srv), got); err != nil {
		t.Fatal(err)
	}
	m := got.Status.Migration
	if m == nil || m.State != v1alpha1.MigrationRunning || m.Deadline == nil || !m.Deadline.Time.Equal(now.Add(10*time.Minute)) {
		t.Errorf("migration status did not round-trip: %+v", m)
	}
	if !meta.IsStatusConditionFalse(got.Status.Conditions, kdagv1alpha1.ConditionReady) || got.Status.Graph == nil || got.Status.Graph.Waiting != 1 {
		t.Errorf("kdag status did not round-trip: %+v", got.Status.Status)
	}

	bad := got.DeepCopy()
	bad.Status.Migration.State = "Exploded"
	wantInvalid(t, env.Client.Status().Update(ctx, bad), `status.migration.state: Unsupported value: "Exploded"`)
}
