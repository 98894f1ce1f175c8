package gitea

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// readyTimeout bounds every wait for the sample to become Ready (`make demo` takes ~6 s).
const readyTimeout = 2 * time.Minute

// podsReady returns "" when the workload's pods (selected by its selector) number want, are
// scheduled on a node and Ready; otherwise what is missing.
func podsReady(ctx context.Context, ns string, selector *metav1.LabelSelector, want int32) string {
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(selector.MatchLabels)); err != nil {
		return err.Error()
	}
	var problems []string
	running := int32(0)
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		running++
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if p.Spec.NodeName == "" || !ready {
			problems = append(problems, fmt.Sprintf("pod %s: node %q, ready %v", p.Name, p.Spec.NodeName, ready))
		}
	}
	if running != want {
		problems = append(problems, fmt.Sprintf("%d pods, want %d", running, want))
	}
	return strings.Join(problems, "; ")
}

// TestSample_BecomesReadyWithMigrationFirst applies config/samples/gitea.yaml: the Gitea is
// Ready within two minutes, the pods of its three workloads are scheduled and Ready, and the
// migration Job completed before the server's Deployment was created.
func TestSample_BecomesReadyWithMigrationFirst(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	start := time.Now()
	key := applySample(t, ns, "gitea.yaml")
	g := waitGiteaReady(t, key, readyTimeout)
	t.Logf("Gitea Ready in %s", time.Since(start).Round(100*time.Millisecond))

	if g.Status.Version != giteav1alpha1.DefaultGiteaVersion || g.Status.OperatorVersion != "e2e" {
		t.Errorf("status version %q operatorVersion %q, want %s and e2e", g.Status.Version, g.Status.OperatorVersion, giteav1alpha1.DefaultGiteaVersion)
	}
	if want := "http://demo-http." + ns + ".svc:3000/"; g.Status.URL != want {
		t.Errorf("status url %q, want %q", g.Status.URL, want)
	}
	if g.Status.Graph == nil || g.Status.Graph.Total != 3 || g.Status.Graph.Ready != 3 {
		t.Errorf("status graph %+v, want 3 of 3 nodes ready", g.Status.Graph)
	}

	server := get(t, ns, "demo", &appsv1.Deployment{})
	pg := get(t, ns, "demo-postgresql", &appsv1.StatefulSet{})
	cache := get(t, ns, "demo-valkey", &appsv1.Deployment{})
	for _, w := range []struct {
		name     string
		selector *metav1.LabelSelector
		replicas *int32
	}{
		{"Deployment demo", server.Spec.Selector, server.Spec.Replicas},
		{"StatefulSet demo-postgresql", pg.Spec.Selector, pg.Spec.Replicas},
		{"Deployment demo-valkey", cache.Spec.Selector, cache.Spec.Replicas},
	} {
		// Readiness of the Gitea means the workloads are available; the pods' own conditions
		// are reported by kwok's fake kubelet and may trail by a moment.
		poll.Until(t, w.name+" pods scheduled and Ready", 30*time.Second, func(ctx context.Context) string {
			return podsReady(ctx, ns, w.selector, *w.replicas)
		})
	}

	// The migration Job completed before the server Deployment existed (second precision).
	job := get(t, ns, "demo-migrate-1-27-3", &batchv1.Job{})
	if job.Status.CompletionTime == nil {
		t.Fatalf("migration Job not complete: %+v", job.Status)
	}
	if server.CreationTimestamp.Before(job.Status.CompletionTime) {
		t.Errorf("Deployment demo created at %s, before the migration Job completed at %s",
			server.CreationTimestamp, job.Status.CompletionTime)
	}
	srv := get(t, ns, "demo", &giteav1alpha1.GiteaServer{})
	if m := srv.Status.Migration; m == nil || m.State != giteav1alpha1.MigrationSucceeded || m.Version != giteav1alpha1.DefaultGiteaVersion ||
		m.StartedAt == nil || !m.Deadline.Equal(ptrTime(m.StartedAt.Add(10*time.Minute))) {
		t.Errorf("GiteaServer status.migration = %+v, want Succeeded for %s with a deadline 10m after its start", m, giteav1alpha1.DefaultGiteaVersion)
	}
}

func ptrTime(t time.Time) *metav1.Time { mt := metav1.NewTime(t); return &mt }

// TestSample_DisablingCachePrunesValkey turns the cache off: the Valkey child is pruned, the
// garbage collector removes its objects, the server's app.ini loses its cache settings and the
// Gitea is Ready again.
func TestSample_DisablingCachePrunesValkey(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	g := waitGiteaReady(t, key, readyTimeout)
	if ini := get(t, ns, "demo-config", &corev1.ConfigMap{}).Data["app.ini"]; !strings.Contains(ini, "[cache]") {
		t.Fatalf("app.ini has no [cache] section with the cache enabled:\n%s", ini)
	}

	mergePatch(t, g, `{"spec":{"cache":{"enabled":false}}}`)
	gone := []client.Object{
		&giteav1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey-config"}},
	}
	start := time.Now()
	poll.Until(t, "Valkey and its objects deleted", readyTimeout, func(ctx context.Context) string {
		return present(ctx, ns, gone...)
	})
	t.Logf("Valkey and its objects deleted in %s", time.Since(start).Round(100*time.Millisecond))
	waitGiteaReady(t, key, readyTimeout)
	t.Logf("Gitea Ready again in %s", time.Since(start).Round(100*time.Millisecond))
	srv := get(t, ns, "demo", &giteav1alpha1.GiteaServer{})
	if srv.Spec.Cache != nil {
		t.Errorf("GiteaServer spec.cache = %+v, want none", srv.Spec.Cache)
	}
	ini := get(t, ns, "demo-config", &corev1.ConfigMap{}).Data["app.ini"]
	for _, section := range []string{"[cache]", "[session]", "[queue]", "redis://"} {
		if strings.Contains(ini, section) {
			t.Errorf("app.ini still has %s:\n%s", section, ini)
		}
	}
	// The Gitea's graph no longer has the Valkey node.
	g = get(t, ns, "demo", &giteav1alpha1.Gitea{})
	if g.Status.Graph == nil || g.Status.Graph.Total != 2 || g.Status.Graph.Ready != 2 {
		t.Errorf("status graph %+v, want 2 of 2 nodes ready", g.Status.Graph)
	}
}

// present returns "" when none of objs (named, in ns) exists, or the ones that do.
func present(ctx context.Context, ns string, objs ...client.Object) string {
	var found []string
	for _, o := range objs {
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.GetName()}, o)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			found = append(found, fmt.Sprintf("%T %s: %v", o, o.GetName(), err))
		default:
			found = append(found, fmt.Sprintf("%T %s", o, o.GetName()))
		}
	}
	return strings.Join(found, ", ")
}

// TestSample_UpgradeMigratesBeforeRollingServer changes spec.version: the new version's
// migration Job completes before the server's pod template moves to the new image, the previous
// Job is pruned and status.version follows.
func TestSample_UpgradeMigratesBeforeRollingServer(t *testing.T) {
	const newVersion = "1.27.4"
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	g := waitGiteaReady(t, key, readyTimeout)
	if img := serverImage(get(t, ns, "demo", &appsv1.Deployment{})); img != "docker.gitea.com/gitea:1.27.3-rootless" {
		t.Fatalf("server image before the upgrade = %s", img)
	}

	mergePatch(t, g, `{"spec":{"version":"`+newVersion+`"}}`)
	// Watch the Deployment until its image changes. Each poll reads the Deployment first, then
	// the Job: a new image seen while the Job, read later, is not complete is a violation.
	var job *batchv1.Job
	sawIncompleteJob := false
	poll.Until(t, "server image "+newVersion, readyTimeout, func(ctx context.Context) string {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, d); err != nil {
			return err.Error()
		}
		j := &batchv1.Job{}
		jobErr := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-migrate-1-27-4"}, j)
		jobDone := jobErr == nil && j.Status.CompletionTime != nil
		if !strings.Contains(serverImage(d), ":"+newVersion+"-") {
			sawIncompleteJob = sawIncompleteJob || (jobErr == nil && !jobDone)
			return "image " + serverImage(d)
		}
		if !jobDone {
			t.Errorf("the Deployment has image %s while migration Job demo-migrate-1-27-4 is not complete (%v, %+v)",
				serverImage(d), jobErr, j.Status)
		}
		job = j
		return ""
	})
	t.Logf("observed the new Job running before the server changed: %v", sawIncompleteJob)

	// Server-side times agree: the field manager's last apply of the Deployment (the image
	// change) is not before the Job's completion (second precision: equal allowed).
	d := get(t, ns, "demo", &appsv1.Deployment{})
	applied := lastApply(d, "kdag-giteaserver")
	if applied == nil || job.Status.CompletionTime == nil || applied.Before(job.Status.CompletionTime) {
		t.Errorf("Deployment applied at %v, migration Job completed at %v: want the Job first", applied, job.Status.CompletionTime)
	}

	g = waitGiteaReady(t, key, readyTimeout)
	poll.Until(t, "old migration Job pruned", 30*time.Second, func(ctx context.Context) string {
		return present(ctx, ns, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "demo-migrate-1-27-3"}})
	})
	poll.Until(t, "status.version "+newVersion, 30*time.Second, func(ctx context.Context) string {
		if err := cl.Get(ctx, key, g); err != nil {
			return err.Error()
		}
		if g.Status.Version != newVersion {
			return "status.version " + g.Status.Version
		}
		return ""
	})
	srv := get(t, ns, "demo", &giteav1alpha1.GiteaServer{})
	if m := srv.Status.Migration; srv.Status.Version != newVersion || m == nil || m.Version != newVersion || m.State != giteav1alpha1.MigrationSucceeded {
		t.Errorf("GiteaServer status version %q migration %+v, want %s Succeeded", srv.Status.Version, m, newVersion)
	}
	if got := d.Labels["app.kubernetes.io/version"]; got != newVersion {
		t.Errorf("Deployment version label %q, want %s", got, newVersion)
	}
}

// lastApply returns the time of manager's last server-side apply on obj, or nil.
func lastApply(obj client.Object, manager string) *metav1.Time {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return mf.Time
		}
	}
	return nil
}

// TestSample_DeletionPolicyOfData deletes the Gitea (issue 13 item 12). Its children and every
// object they created are gone (owner references, the garbage collector, kdag's teardown), except
// the data: with storage.deletionPolicy Retain (the default) the repositories' claim and the
// database's claim stay, released; a Gitea re-created under the same name reuses both (the same
// claims, by UID) and becomes Ready. With Delete, the claims go too.
func TestSample_DeletionPolicyOfData(t *testing.T) {
	for _, policy := range []giteav1alpha1.StorageDeletionPolicy{giteav1alpha1.StorageRetain, giteav1alpha1.StorageDelete} {
		t.Run(string(policy), func(t *testing.T) { testDeletionPolicy(t, policy) })
	}
}

func testDeletionPolicy(t *testing.T, policy giteav1alpha1.StorageDeletionPolicy) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	newGitea := func() *giteav1alpha1.Gitea {
		g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
		g.Spec.Storage.DeletionPolicy = policy
		g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{DeletionPolicy: policy}}
		if err := cl.Create(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := newGitea()
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
	const repoClaim, dbClaim = "demo-data", "data-demo-postgresql-0"
	claimUID := map[string]string{}
	for _, name := range []string{repoClaim, dbClaim} {
		poll.Until(t, "claim "+name+" exists", readyTimeout, func(ctx context.Context) string {
			c := &corev1.PersistentVolumeClaim{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
				return err.Error()
			}
			claimUID[name] = string(c.UID)
			return ""
		})
	}

	// Everything a kdag controller applied carries its owner's UID label.
	owned := func(ctx context.Context) (map[string]bool, error) {
		out := map[string]bool{}
		lists := []client.ObjectList{
			&giteav1alpha1.PostgreSQLList{}, &giteav1alpha1.ValkeyList{}, &giteav1alpha1.GiteaServerList{},
			&corev1.SecretList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}, &corev1.PersistentVolumeClaimList{},
			&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &batchv1.JobList{},
		}
		for _, l := range lists {
			if err := cl.List(ctx, l, client.InNamespace(ns), client.HasLabels{kdagv1alpha1.LabelOwnerUID}); err != nil {
				return nil, err
			}
			items, err := metaItems(l)
			if err != nil {
				return nil, err
			}
			for _, name := range items {
				out[fmt.Sprintf("%T %s", l, name)] = true
			}
		}
		return out, nil
	}
	before, err := owned(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// 3 children + PostgreSQL 4 (Secret, Service, claim, StatefulSet) + Valkey 3 + GiteaServer 6
	// (Secret, ConfigMap, claim, Job, Deployment, Service); with Delete, the PostgreSQL's kept dump
	// claim too (its dump Job exists only while the PostgreSQL is being deleted).
	wantOwned := 16
	if policy == giteav1alpha1.StorageDelete {
		wantOwned++
	}
	if len(before) != wantOwned {
		t.Fatalf("%d objects with the owner label before the delete, want %d: %v", len(before), wantOwned, before)
	}

	start := time.Now()
	if err := cl.Delete(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "Gitea, children, their objects and pods deleted", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(g), &giteav1alpha1.Gitea{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("Gitea still there (%v)", err)
		}
		left, err := owned(ctx)
		if err != nil {
			return err.Error()
		}
		if len(left) > 0 {
			return fmt.Sprintf("left: %v", left)
		}
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/part-of": "gitea"}); err != nil {
			return err.Error()
		}
		if len(pods.Items) > 0 {
			return fmt.Sprintf("%d pods left", len(pods.Items))
		}
		if policy == giteav1alpha1.StorageDelete {
			claims := &corev1.PersistentVolumeClaimList{}
			if err := cl.List(ctx, claims, client.InNamespace(ns)); err != nil {
				return err.Error()
			}
			names, _ := metaItems(claims)
			// The database's dump, taken before it was deleted, is kept (TestHooks_*).
			if names = slices.DeleteFunc(names, func(n string) bool { return n == postgresql.DumpClaimName("demo-postgresql") }); len(names) > 0 {
				return fmt.Sprintf("claims left with deletionPolicy Delete: %v", names)
			}
		}
		return ""
	})
	t.Logf("deleted in %s", time.Since(start).Round(100*time.Millisecond))
	if policy == giteav1alpha1.StorageDelete {
		return
	}

	for _, name := range []string{repoClaim, dbClaim} {
		c := get(t, ns, name, &corev1.PersistentVolumeClaim{})
		if string(c.UID) != claimUID[name] || !c.DeletionTimestamp.IsZero() {
			t.Fatalf("claim %s was deleted with deletionPolicy Retain", name)
		}
		if len(c.OwnerReferences) != 0 {
			t.Errorf("retained claim %s still has owners %v", name, c.OwnerReferences)
		}
	}
	for name, owner := range map[string]string{repoClaim: "GiteaServer/demo", dbClaim: "PostgreSQL/demo-postgresql"} {
		if got := get(t, ns, name, &corev1.PersistentVolumeClaim{}).Annotations[kdagv1alpha1.AnnotationAdopt]; got != owner {
			t.Errorf("retained claim %s: %s=%q, want %s", name, kdagv1alpha1.AnnotationAdopt, got, owner)
		}
	}

	// A Gitea of the same name mounts the same claims again.
	g = newGitea()
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
	server := get(t, ns, "demo", &giteav1alpha1.GiteaServer{})
	repo := get(t, ns, repoClaim, &corev1.PersistentVolumeClaim{})
	if string(repo.UID) != claimUID[repoClaim] || repo.Labels[kdagv1alpha1.LabelOwnerUID] != string(server.UID) {
		t.Errorf("repositories claim after the re-creation: UID %s (was %s), owner label %q (server %s); want the same claim, adopted",
			repo.UID, claimUID[repoClaim], repo.Labels[kdagv1alpha1.LabelOwnerUID], server.UID)
	}
	if db := get(t, ns, dbClaim, &corev1.PersistentVolumeClaim{}); string(db.UID) != claimUID[dbClaim] {
		t.Errorf("database claim after the re-creation: UID %s, want %s", db.UID, claimUID[dbClaim])
	}
}

// metaItems returns the names of a list's items.
func metaItems(l client.ObjectList) ([]string, error) {
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(items))
	for _, item := range items {
		o, err := meta.Accessor(item)
		if err != nil {
			return nil, err
		}
		names = append(names, o.GetName())
	}
	return names, nil
}

// TestSample_GeneratedSecretsSurviveRestart stops the operator and starts a new one: after
// every owner is reconciled by the new operator, the generated database password and Gitea's
// keys are byte-for-byte the same.
func TestSample_GeneratedSecretsSurviveRestart(t *testing.T) {
	ns := local.Namespace(t)
	stop := startManager(t, ns, "e2e-first")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)
	secrets := []string{"demo-postgresql-credentials", "demo-secrets"}
	before := map[string]map[string][]byte{}
	for _, name := range secrets {
		s := get(t, ns, name, &corev1.Secret{})
		if len(s.Data) == 0 {
			t.Fatalf("Secret %s is empty", name)
		}
		before[name] = s.Data
	}
	stop()

	startManager(t, ns, "e2e-second")
	g := get(t, ns, "demo", &giteav1alpha1.Gitea{})
	mergePatch(t, g, `{"metadata":{"annotations":{"e2e.kdag.dev/reconcile":"`+time.Now().Format(time.RFC3339Nano)+`"}}}`)
	// Each owner's status names the operator that last wrote it: all four were reconciled by
	// the new one, and are Ready.
	gitea, pg, vk, srv := &giteav1alpha1.Gitea{}, &giteav1alpha1.PostgreSQL{}, &giteav1alpha1.Valkey{}, &giteav1alpha1.GiteaServer{}
	owners := []struct {
		obj    client.Object
		name   string
		status func() *kdagv1alpha1.Status
	}{
		{gitea, "demo", func() *kdagv1alpha1.Status { return &gitea.Status.Status }},
		{pg, "demo-postgresql", func() *kdagv1alpha1.Status { return &pg.Status.Status }},
		{vk, "demo-valkey", func() *kdagv1alpha1.Status { return &vk.Status.Status }},
		{srv, "demo", func() *kdagv1alpha1.Status { return &srv.Status.Status }},
	}
	for _, o := range owners {
		o.obj.SetNamespace(ns)
		o.obj.SetName(o.name)
	}
	for _, o := range owners {
		poll.Until(t, fmt.Sprintf("%T %s reconciled by the new operator", o.obj, o.obj.GetName()), readyTimeout, func(ctx context.Context) string {
			if why := readyFor(ctx, o.obj, o.status); why != "" {
				return why
			}
			if v := o.status().OperatorVersion; v != "e2e-second" {
				return "operatorVersion " + v
			}
			return ""
		})
	}
	for _, name := range secrets {
		after := get(t, ns, name, &corev1.Secret{}).Data
		if len(after) != len(before[name]) {
			t.Errorf("Secret %s has keys %v after the restart, %v before", name, keys(after), keys(before[name]))
		}
		for k, v := range before[name] {
			if !bytes.Equal(after[k], v) {
				t.Errorf("Secret %s key %s changed across the operator restart", name, k)
			}
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLongestAcceptedNames_BecomeReady creates Gitea objects with the longest names their
// validation accepts: 41 characters with a managed database (the StatefulSet's pods get the
// label controller-revision-hash "<name>-postgresql-<hash>", at most 63), 48 with an external
// one (the migration Job "<name>-migrate-1-27-3"). Every derived object, pod and label must be
// valid, so both become Ready like the sample; one character more is refused with Stalled.
func TestLongestAcceptedNames_BecomeReady(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	db := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "external-db"},
		StringData: map[string]string{"host": "db.example.com", "port": "5432", "user": "gitea", "password": "x", "database": "gitea"},
	}
	if err := cl.Create(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	name := func(n int) string { return "g" + strings.Repeat("x", n-1) }
	externalDB := giteav1alpha1.DatabaseSpec{
		Type:     giteav1alpha1.DatabaseExternal,
		External: &giteav1alpha1.ExternalDatabaseSpec{SecretRef: giteav1alpha1.SecretReference{Name: db.Name}},
	}
	accepted := []*giteav1alpha1.Gitea{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(41)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(48)}, Spec: giteav1alpha1.GiteaSpec{Database: externalDB}},
	}
	refused := []*giteav1alpha1.Gitea{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(42)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(49)}, Spec: giteav1alpha1.GiteaSpec{Database: externalDB}},
	}
	for _, g := range append(append([]*giteav1alpha1.Gitea{}, accepted...), refused...) {
		if err := cl.Create(t.Context(), g); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range accepted {
		waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
	}
	sts := get(t, ns, name(41)+"-postgresql", &appsv1.StatefulSet{})
	poll.Until(t, "database pod Ready", 30*time.Second, func(ctx context.Context) string {
		return podsReady(ctx, ns, sts.Spec.Selector, 1)
	})
	for _, g := range refused {
		poll.Until(t, "Gitea "+g.Name+" Stalled", 30*time.Second, func(ctx context.Context) string {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
				return err.Error()
			}
			c := meta.FindStatusCondition(g.Status.Conditions, kdagv1alpha1.ConditionStalled)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "use a shorter name") {
				return fmt.Sprintf("Stalled condition %+v", c)
			}
			return ""
		})
		children := &giteav1alpha1.GiteaServerList{}
		if err := cl.List(t.Context(), children, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": g.Name}); err != nil {
			t.Fatal(err)
		}
		if len(children.Items) > 0 {
			t.Errorf("refused Gitea %s has a GiteaServer", g.Name)
		}
	}
}
