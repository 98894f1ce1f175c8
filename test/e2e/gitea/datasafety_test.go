package gitea

// Data safety (issue 20): credentials and data live and die together, ownership is never a
// removable label. One test per numbered case of the issue, on the local cluster, against the
// reference operator as a user would drive it.

import (
	"bytes"
	"context"
	"fmt"
	"os"
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
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

const (
	dbSecret  = "demo-postgresql-credentials"
	dbClaim   = "data-demo-postgresql-0"
	keySecret = "demo-secrets"
	repoClaim = "demo-data"
)

// snapshot is what must survive: the generated Secrets' data and the claims' UIDs.
type snapshot struct {
	data   map[string]map[string][]byte // Secret name -> data
	claims map[string]string            // claim name -> UID
}

// takeSnapshot records the Secrets and claims named, waiting for each to exist.
func takeSnapshot(t *testing.T, ns string, secrets, claims []string) snapshot {
	t.Helper()
	s := snapshot{data: map[string]map[string][]byte{}, claims: map[string]string{}}
	for _, name := range secrets {
		poll.Until(t, "Secret "+name+" exists", readyTimeout, func(ctx context.Context) string {
			sec := &corev1.Secret{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
				return err.Error()
			}
			s.data[name] = sec.Data
			return ""
		})
	}
	for _, name := range claims {
		poll.Until(t, "claim "+name+" exists", readyTimeout, func(ctx context.Context) string {
			c := &corev1.PersistentVolumeClaim{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
				return err.Error()
			}
			s.claims[name] = string(c.UID)
			return ""
		})
	}
	return s
}

// assertSame fails the test when a recorded Secret's data or claim's UID changed. It never
// prints a Secret's values.
func (s snapshot) assertSame(t *testing.T, ns, after string) {
	t.Helper()
	for name, want := range s.data {
		got := get(t, ns, name, &corev1.Secret{}).Data
		same := len(got) == len(want)
		for k, v := range want {
			same = same && bytes.Equal(got[k], v)
		}
		if !same {
			t.Errorf("after %s: Secret %s has new values: a key that opened the data was replaced", after, name)
		}
	}
	for name, uid := range s.claims {
		if got := get(t, ns, name, &corev1.PersistentVolumeClaim{}); string(got.UID) != uid {
			t.Errorf("after %s: claim %s is a new one (UID %s, was %s): the data is gone", after, name, got.UID, uid)
		}
	}
}

// condition returns the condition typ of a status, or nil.
func condition(st *kdagv1alpha1.Status, typ string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, typ)
}

// waitCondition waits until obj's status (read by status) has condition typ with status True
// and a message containing want.
func waitCondition(t *testing.T, obj client.Object, status func() *kdagv1alpha1.Status, typ, want string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%T %s: %s with %q", obj, obj.GetName(), typ, want), readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err.Error()
		}
		c := condition(status(), typ)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, want) {
			return fmt.Sprintf("%s condition %+v", typ, c)
		}
		return ""
	})
}

// consistently checks cond every 200 ms for d and fails the test the first time it is not "".
func consistently(t *testing.T, what string, d time.Duration, cond func(ctx context.Context) string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if got := cond(t.Context()); got != "" {
			t.Fatalf("%s: %s", what, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDataSafety_1_NoNewPasswordOverOldData: the database's generated password is never replaced
// while its data claim is reused, whatever the user does to the objects around it.
func TestDataSafety_1_NoNewPasswordOverOldData(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, ns string, key client.ObjectKey)
	}{
		{"the PostgreSQL child is deleted", func(t *testing.T, ns string, key client.ObjectKey) {
			pg := get(t, ns, "demo-postgresql", &giteav1alpha1.PostgreSQL{})
			if err := cl.Delete(t.Context(), pg); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, "the PostgreSQL is re-created", readyTimeout, func(ctx context.Context) string {
				again := &giteav1alpha1.PostgreSQL{}
				if err := cl.Get(ctx, client.ObjectKeyFromObject(pg), again); err != nil || again.UID == pg.UID {
					return fmt.Sprintf("not yet (%v)", err)
				}
				return ""
			})
		}},
		{"the database goes external and back to managed", func(t *testing.T, ns string, key client.ObjectKey) {
			external := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "external-db"}, StringData: map[string]string{
				"host": "db.example.com", "port": "5432", "user": "gitea", "password": "external", "database": "gitea"}}
			if err := cl.Create(t.Context(), external); err != nil {
				t.Fatal(err)
			}
			mergePatch(t, get(t, ns, key.Name, &giteav1alpha1.Gitea{}),
				`{"spec":{"database":{"type":"external","managed":null,"external":{"secretRef":{"name":"external-db"}}}}}`)
			waitGiteaReady(t, key, readyTimeout)
			poll.Until(t, "the PostgreSQL is pruned", readyTimeout, func(ctx context.Context) string {
				return present(ctx, ns, &giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Name: "demo-postgresql"}})
			})
			mergePatch(t, get(t, ns, key.Name, &giteav1alpha1.Gitea{}),
				`{"spec":{"database":{"type":"managed","external":null,"managed":{}}}}`)
		}},
		{"the Gitea is deleted and applied again", func(t *testing.T, ns string, key client.ObjectKey) {
			if err := cl.Delete(t.Context(), get(t, ns, key.Name, &giteav1alpha1.Gitea{})); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, "the Gitea and its children are gone", readyTimeout, func(ctx context.Context) string {
				return present(ctx, ns, &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Name: key.Name}},
					&giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Name: "demo-postgresql"}},
					&giteav1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: "demo"}})
			})
			applySample(t, ns, "gitea.yaml")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := local.Namespace(t)
			startManager(t, ns, "e2e")
			key := applySample(t, ns, "gitea.yaml")
			waitGiteaReady(t, key, readyTimeout)
			before := takeSnapshot(t, ns, []string{dbSecret}, []string{dbClaim})
			tc.do(t, ns, key)
			waitGiteaReady(t, key, readyTimeout)
			before.assertSame(t, ns, tc.name)
		})
	}

	t.Run("the credentials Secret is deleted", func(t *testing.T) {
		ns := local.Namespace(t)
		startManager(t, ns, "e2e")
		key := applySample(t, ns, "gitea.yaml")
		waitGiteaReady(t, key, readyTimeout)
		takeSnapshot(t, ns, nil, []string{dbClaim})
		old := get(t, ns, dbSecret, &corev1.Secret{})
		if err := cl.Delete(t.Context(), old); err != nil {
			t.Fatal(err)
		}
		pg := &giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-postgresql"}}
		waitCondition(t, pg, func() *kdagv1alpha1.Status { return &pg.Status.Status }, kdagv1alpha1.ConditionStalled, "Secret "+ns+"/"+dbSecret+" is gone while PersistentVolumeClaim "+ns+"/"+dbClaim)
		if c := condition(&pg.Status.Status, kdagv1alpha1.ConditionStalled); c.Reason != kdagv1alpha1.ReasonDataKeyMissing {
			t.Errorf("Stalled reason %s, want %s", c.Reason, kdagv1alpha1.ReasonDataKeyMissing)
		}
		if msg := present(t.Context(), ns, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: dbSecret}}); msg != "" {
			t.Fatalf("a new password was generated over the old data: %s", msg)
		}
		g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}
		// The Gitea learns of its PostgreSQL's status from a watch: one reconcile later, not at
		// the instant the test reads the PostgreSQL's. It must not stay Ready past that.
		poll.Until(t, "the Gitea no longer Ready while its database's password is gone", 30*time.Second, func(ctx context.Context) string {
			if readyFor(ctx, g, func() *kdagv1alpha1.Status { return &g.Status.Status }) == "" {
				return "the Gitea is still Ready"
			}
			return ""
		})

		// Restored from a backup (no kdag labels), annotated for the PostgreSQL: adopted as is.
		restored := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dbSecret,
				Annotations: map[string]string{kdagv1alpha1.AnnotationAdopt: "PostgreSQL/demo-postgresql"}},
			Data: old.Data,
		}
		if err := cl.Create(t.Context(), restored); err != nil {
			t.Fatal(err)
		}
		waitGiteaReady(t, key, readyTimeout)
		if got := get(t, ns, dbSecret, &corev1.Secret{}); got.UID != restored.UID || !bytes.Equal(got.Data["password"], old.Data["password"]) {
			t.Error("the restored Secret was replaced")
		}
	})
}

// TestDataSafety_2_ServerChildDeletedKeepsRepositoriesAndKeys: deleting the GiteaServer brings it
// back on the same repositories claim with the same SECRET_KEY and INTERNAL_TOKEN.
func TestDataSafety_2_ServerChildDeletedKeepsRepositoriesAndKeys(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)
	before := takeSnapshot(t, ns, []string{keySecret}, []string{repoClaim})
	srv := get(t, ns, "demo", &giteav1alpha1.GiteaServer{})
	if err := cl.Delete(t.Context(), srv); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the GiteaServer is re-created", readyTimeout, func(ctx context.Context) string {
		again := &giteav1alpha1.GiteaServer{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(srv), again); err != nil || again.UID == srv.UID {
			return fmt.Sprintf("not yet (%v)", err)
		}
		return ""
	})
	waitGiteaReady(t, key, readyTimeout)
	before.assertSame(t, ns, "the GiteaServer was deleted")
}

// nodePool labels the cluster's first node so that pods with nodeSelector {pool: value} run on
// it; the label is removed when the test ends.
func nodePool(t *testing.T, value string) {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := cl.List(t.Context(), nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("list nodes: %v (%d)", err, len(nodes.Items))
	}
	name := nodes.Items[0].Name
	mergePatch(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, `{"metadata":{"labels":{"kdag-e2e/pool":"`+value+`"}}}`)
	t.Cleanup(func() {
		_ = cl.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
			client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"kdag-e2e/pool":null}}}`)))
	})
}

// TestDataSafety_3_RunningMigrationIsNeverInterrupted: a version bump while the previous
// version's migration Job still runs neither deletes that Job nor starts the next migration
// beside it; the next one starts after it finished, and the status says what it waits for.
func TestDataSafety_3_RunningMigrationIsNeverInterrupted(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	// The server's pods (its migration's too) run only on a node labelled for this test: until
	// the label is set, the 1.27.3 migration's pod is Pending and its Job active.
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	g.Spec.NodeSelector = map[string]string{"kdag-e2e/pool": ns}
	if err := cl.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	const first, second = "demo-migrate-1-27-3", "demo-migrate-1-27-4"
	srv := &giteav1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	poll.Until(t, "the 1.27.3 migration runs", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(srv), srv); err != nil {
			return err.Error()
		}
		if m := srv.Status.Migration; m == nil || m.Version != "1.27.3" || m.State != giteav1alpha1.MigrationRunning {
			return fmt.Sprintf("migration %+v", m)
		}
		return ""
	})
	firstJob := get(t, ns, first, &batchv1.Job{})

	mergePatch(t, get(t, ns, "demo", &giteav1alpha1.Gitea{}), `{"spec":{"version":"1.27.4"}}`)
	waitCondition(t, srv, func() *kdagv1alpha1.Status { return &srv.Status.Status }, kdagv1alpha1.ConditionReconciling, "Job "+ns+"/"+first)
	consistently(t, "the running migration stays alone", 3*time.Second, func(ctx context.Context) string {
		j := &batchv1.Job{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, j); err != nil || j.UID != firstJob.UID || !j.DeletionTimestamp.IsZero() {
			return fmt.Sprintf("Job %s was deleted or replaced while it ran (%v)", first, err)
		}
		return present(ctx, ns, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: second}})
	})
	if m := get(t, ns, "demo", &giteav1alpha1.GiteaServer{}).Status.Migration; m == nil || m.Version != "1.27.3" {
		t.Errorf("status.migration %+v while 1.27.3 runs, want it reporting 1.27.3", m)
	}

	// Let the pods run: the 1.27.3 migration completes, then the 1.27.4 one runs, then the server
	// rolls and the 1.27.3 Job is pruned. Watch both Jobs on the way.
	nodePool(t, ns)
	var completed *metav1.Time
	var next *batchv1.Job
	poll.Until(t, "the 1.27.4 migration after the 1.27.3 one", readyTimeout, func(ctx context.Context) string {
		j := &batchv1.Job{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, j); err == nil && j.Status.CompletionTime != nil {
			completed = j.Status.CompletionTime
		}
		n := &batchv1.Job{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: second}, n); err == nil {
			next = n
		}
		if completed == nil || next == nil {
			return fmt.Sprintf("1.27.3 completed at %v, 1.27.4 Job %v", completed, next != nil)
		}
		return ""
	})
	if next.CreationTimestamp.Before(completed) {
		t.Errorf("the 1.27.4 migration was created at %v, before the 1.27.3 one completed at %v", next.CreationTimestamp, completed)
	}
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
}

// TestDataSafety_4_FinishedMigrationIsNotRunAgain: a finished migration Job deleted (a TTL, a
// clean-up) is not run again, and the server does not roll.
func TestDataSafety_4_FinishedMigrationIsNotRunAgain(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)
	const job = "demo-migrate-1-27-3"
	poll.Until(t, "status.migration Succeeded", readyTimeout, func(ctx context.Context) string {
		srv := &giteav1alpha1.GiteaServer{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, srv); err != nil {
			return err.Error()
		}
		if m := srv.Status.Migration; m == nil || m.State != giteav1alpha1.MigrationSucceeded {
			return fmt.Sprintf("migration %+v", m)
		}
		return ""
	})
	generation := get(t, ns, "demo", &appsv1.Deployment{}).Generation
	if err := cl.Delete(t.Context(), get(t, ns, job, &batchv1.Job{}), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the Job is gone", readyTimeout, func(ctx context.Context) string {
		return present(ctx, ns, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job}})
	})
	consistently(t, "the migration is not run again", 5*time.Second, func(ctx context.Context) string {
		if msg := present(ctx, ns, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job}}); msg != "" {
			return "run again: " + msg
		}
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, d); err != nil {
			return err.Error()
		}
		if d.Generation != generation {
			return fmt.Sprintf("the server rolled: generation %d → %d", generation, d.Generation)
		}
		return ""
	})
	waitGiteaReady(t, key, readyTimeout)
}

// TestDataSafety_5_OwnershipIsNotALabel: a user's renamed copy of a generated Secret that kept
// kdag's labels survives the reconciles (prune deletes only what the owner controls), and kdag's
// own Deployment whose owner-UID label someone removed is still kdag's: the label comes back and
// rollouts go on.
func TestDataSafety_5_OwnershipIsNotALabel(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)

	generated := get(t, ns, keySecret, &corev1.Secret{})
	backup := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: keySecret + "-backup", Labels: generated.Labels}, Data: generated.Data}
	if err := cl.Create(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	d := get(t, ns, "demo", &appsv1.Deployment{})
	mergePatch(t, d, `{"metadata":{"labels":{"`+kdagv1alpha1.LabelOwnerUID+`":null}}}`)
	poll.Until(t, "the Deployment's owner-UID label is back", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err.Error()
		}
		if d.Labels[kdagv1alpha1.LabelOwnerUID] == "" {
			return "no owner-UID label"
		}
		return ""
	})
	// A version bump rolls the Deployment: it is not refused as foreign.
	mergePatch(t, get(t, ns, "demo", &giteav1alpha1.Gitea{}), `{"spec":{"version":"1.27.4"}}`)
	waitGiteaReady(t, key, readyTimeout)
	if img := serverImage(get(t, ns, "demo", &appsv1.Deployment{})); !strings.Contains(img, ":1.27.4-") {
		t.Errorf("server image %s after the upgrade, want 1.27.4", img)
	}
	consistently(t, "the backup copy survives", 2*time.Second, func(ctx context.Context) string {
		c := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(backup), c); err != nil || c.UID != backup.UID {
			return fmt.Sprintf("the user's copy %s was deleted (%v)", backup.Name, err)
		}
		return ""
	})
}

// TestDataSafety_6_FirstDeployRestartsNothing: a first deploy writes each workload once: the
// database's StatefulSet and the Deployments stay at generation 1 (the dependencies hash is the
// same whether a dependency was just created or read from the cache).
func TestDataSafety_6_FirstDeployRestartsNothing(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)
	consistently(t, "workloads written once", 2*time.Second, func(ctx context.Context) string {
		for _, o := range []client.Object{
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "demo-postgresql"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-valkey"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		} {
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.GetName()}, o); err != nil {
				return err.Error()
			}
			if o.GetGeneration() != 1 {
				return fmt.Sprintf("%T %s at generation %d after a first deploy, want 1", o, o.GetName(), o.GetGeneration())
			}
		}
		return ""
	})
}

// TestDataSafety_7_ExtraEnvOverridesTheOperatorsVariables: extraEnv replaces a variable the
// operator sets, as the API says, in the server and in its Jobs.
func TestDataSafety_7_ExtraEnvOverridesTheOperatorsVariables(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	g.Spec.ExtraEnv = []corev1.EnvVar{{Name: "GITEA_WORK_DIR", Value: "/var/lib/gitea/work"}, {Name: "HOME", Value: "/tmp/home"}}
	if err := cl.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
	templates := map[string]corev1.PodSpec{
		"Deployment demo":         get(t, ns, "demo", &appsv1.Deployment{}).Spec.Template.Spec,
		"Job demo-migrate-1-27-3": get(t, ns, "demo-migrate-1-27-3", &batchv1.Job{}).Spec.Template.Spec,
	}
	for name, spec := range templates {
		values := map[string][]string{}
		for _, e := range spec.Containers[0].Env {
			values[e.Name] = append(values[e.Name], e.Value)
		}
		if got := values["GITEA_WORK_DIR"]; len(got) != 1 || got[0] != "/var/lib/gitea/work" {
			t.Errorf("%s: GITEA_WORK_DIR %q, want the user's value once", name, got)
		}
		if got := values["HOME"]; len(got) != 1 || got[0] != "/tmp/home" {
			t.Errorf("%s: HOME %q, want the user's value once", name, got)
		}
	}
}

// TestDataSafety_8_ValkeyConfigCannotInjectDirectives: a reserved directive in another case, or a
// value with a newline, is refused at admission.
func TestDataSafety_8_ValkeyConfigCannotInjectDirectives(t *testing.T) {
	ns := local.Namespace(t)
	for name, config := range map[string]map[string]giteav1alpha1.ValkeyConfigValue{
		"reserved key in upper case": {"BIND": "127.0.0.1"},
		"newline in a value":         {"maxmemory": "64mb\nrequirepass x"},
	} {
		vk := &giteav1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: giteav1alpha1.ValkeySpec{Config: config}}
		if err := cl.Create(t.Context(), vk); !apierrors.IsInvalid(err) {
			t.Errorf("%s: create = %v, want refused as Invalid", name, err)
		}
	}
}

// TestDataSafety_9_OneSecretForDatabaseAndAdmin: a valid spec whose external database and
// administrator share one Secret becomes Ready.
func TestDataSafety_9_OneSecretForDatabaseAndAdmin(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	shared := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all-in-one"}, StringData: map[string]string{
		"host": "db.example.com", "port": "5432", "user": "gitea", "password": "p", "database": "gitea",
		"username": "admin", "email": "admin@example.com"}}
	if err := cl.Create(t.Context(), shared); err != nil {
		t.Fatal(err)
	}
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	g.Spec.Database = giteav1alpha1.DatabaseSpec{Type: giteav1alpha1.DatabaseExternal,
		External: &giteav1alpha1.ExternalDatabaseSpec{SecretRef: giteav1alpha1.SecretReference{Name: "all-in-one"}}}
	g.Spec.Admin = &giteav1alpha1.AdminSpec{SecretRef: giteav1alpha1.SecretReference{Name: "all-in-one"}}
	if err := cl.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
}

// TestDataSafety_10_OrphanedChildrenReattachedByAnnotation: after `kubectl delete gitea demo
// --cascade=orphan`, a re-created demo says how to take its children back, and does once they
// are annotated: the same children, the same data.
func TestDataSafety_10_OrphanedChildrenReattachedByAnnotation(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)
	before := takeSnapshot(t, ns, []string{dbSecret, keySecret}, []string{repoClaim, dbClaim})
	children := []client.Object{
		get(t, ns, "demo-postgresql", &giteav1alpha1.PostgreSQL{}),
		get(t, ns, "demo-valkey", &giteav1alpha1.Valkey{}),
		get(t, ns, "demo", &giteav1alpha1.GiteaServer{}),
	}
	if err := cl.Delete(t.Context(), get(t, ns, key.Name, &giteav1alpha1.Gitea{}), client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the Gitea is gone, its children orphaned", readyTimeout, func(ctx context.Context) string {
		if msg := present(ctx, ns, &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Name: key.Name}}); msg != "" {
			return msg
		}
		for _, c := range children {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
				return err.Error()
			}
			if len(c.GetOwnerReferences()) != 0 {
				return fmt.Sprintf("%T %s still owned", c, c.GetName())
			}
		}
		return ""
	})

	applySample(t, ns, "gitea.yaml")
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}
	waitCondition(t, g, func() *kdagv1alpha1.Status { return &g.Status.Status }, kdagv1alpha1.ConditionReconciling, kdagv1alpha1.AnnotationAdopt+"=Gitea/demo")
	for _, c := range children {
		mergePatch(t, c, `{"metadata":{"annotations":{"`+kdagv1alpha1.AnnotationAdopt+`":"Gitea/demo"}}}`)
	}
	waitGiteaReady(t, key, readyTimeout)
	for _, c := range children {
		again := c.DeepCopyObject().(client.Object)
		if err := cl.Get(t.Context(), client.ObjectKeyFromObject(c), again); err != nil || again.GetUID() != c.GetUID() {
			t.Errorf("%T %s was replaced (%v)", c, c.GetName(), err)
		}
	}
	before.assertSame(t, ns, "the orphaned children were re-attached")
}

// TestDataSafety_11_AdmissionRefusesWhatCannotBeApplied: on a running installation the claim's
// access mode cannot change and limits cannot go below requests; an Ingress TLS Secret that does
// not exist keeps the Gitea from Ready, saying so, instead of serving an https URL that fails.
func TestDataSafety_11_AdmissionRefusesWhatCannotBeApplied(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)
	g := get(t, ns, key.Name, &giteav1alpha1.Gitea{})
	for patch, want := range map[string]string{
		`{"spec":{"storage":{"accessMode":"ReadWriteMany"}}}`:                                                       "storage.accessMode is immutable",
		`{"spec":{"resources":{"requests":{"memory":"512Mi"},"limits":{"memory":"128Mi"}}}}`:                        "limits must not be below",
		`{"spec":{"extraEnv":[{"name":"BIG","value":"` + strings.Repeat("x", 5000) + `"}]}}`:                        "at most 4096 characters",
		`{"spec":{"database":{"type":"external","managed":null,"external":{"secretRef":{"name":"demo-secrets"}}}}}`: "must not name <name>-secrets",
	} {
		err := cl.Patch(t.Context(), g.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch)))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("patch %.80s: %v, want refused with %q", patch, err, want)
		}
	}

	mergePatch(t, g, `{"spec":{"ingress":{"host":"git.example.com","tlsSecretName":"git-tls"}}}`)
	waitCondition(t, g, func() *kdagv1alpha1.Status { return &g.Status.Status }, kdagv1alpha1.ConditionReconciling, "Secret "+ns+"/git-tls")
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")}}
	if err := cl.Create(t.Context(), tls); err != nil {
		t.Fatal(err)
	}
	g = waitGiteaReady(t, key, readyTimeout)
	poll.Until(t, "status.url is https", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, key, g); err != nil {
			return err.Error()
		}
		if g.Status.URL != "https://git.example.com/" {
			return "url " + g.Status.URL
		}
		return ""
	})
}

// TestDataSafety_12_HandEditsRotationAndNamespaceDeletion: a generated Secret cannot be edited by
// hand (immutable); rotating the external database Secret's password rolls the server; deleting
// the namespace makes the operator re-create nothing and log no error.
func TestDataSafety_12_HandEditsRotationAndNamespaceDeletion(t *testing.T) {
	ns := local.Namespace(t)
	_, logPath := startManagerWithLog(t, ns, "e2e")
	key := applySample(t, ns, "gitea.yaml")
	waitGiteaReady(t, key, readyTimeout)

	s := get(t, ns, dbSecret, &corev1.Secret{})
	s.Data["password"] = []byte("edited")
	if err := cl.Update(t.Context(), s); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("editing the generated password: %v, want refused (immutable)", err)
	}

	// External database: rotate its password.
	external := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "external-db"}, StringData: map[string]string{
		"host": "db.example.com", "port": "5432", "user": "gitea", "password": "first", "database": "gitea"}}
	if err := cl.Create(t.Context(), external); err != nil {
		t.Fatal(err)
	}
	mergePatch(t, get(t, ns, key.Name, &giteav1alpha1.Gitea{}),
		`{"spec":{"database":{"type":"external","managed":null,"external":{"secretRef":{"name":"external-db"}}}}}`)
	waitGiteaReady(t, key, readyTimeout)
	before := get(t, ns, "demo", &appsv1.Deployment{})
	external = get(t, ns, "external-db", &corev1.Secret{})
	external.Data["password"] = []byte("rotated")
	if err := cl.Update(t.Context(), external); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the server rolls on the rotated password", readyTimeout, func(ctx context.Context) string {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(before), d); err != nil {
			return err.Error()
		}
		if d.Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash] == before.Spec.Template.Annotations[kdagv1alpha1.AnnotationDependenciesHash] {
			return "pod template unchanged"
		}
		return ""
	})
	waitGiteaReady(t, key, readyTimeout)

	// The namespace goes: no re-creation attempts, no error logged. First let the operator finish
	// what it does now (its events are sent asynchronously), so that what follows in its log
	// is what the deletion caused.
	mark := waitQuiet(t, logPath, 2*time.Second)
	if err := cl.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the namespace is gone", readyTimeout, func(ctx context.Context) string {
		return present(ctx, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw[mark:]), "\n") {
		if strings.Contains(line, "\tERROR\t") || strings.Contains(line, "reconcile failed") {
			t.Errorf("operator logged an error while its namespace was deleted: %.300s", line)
		}
	}
}

// waitQuiet waits until the file at path has not grown for quiet, and returns its size then.
func waitQuiet(t *testing.T, path string, quiet time.Duration) int64 {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	last, since := int64(-1), time.Now()
	for time.Now().Before(deadline) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != last {
			last, since = fi.Size(), time.Now()
		} else if time.Since(since) >= quiet {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s kept growing for %s", path, readyTimeout)
	return 0
}
