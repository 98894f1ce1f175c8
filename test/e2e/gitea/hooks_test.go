package gitea

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// TestHooks_DatabaseDumpedBeforeDelete: a Gitea whose database has deletionPolicy Delete is
// deleted. The PostgreSQL's teardown first runs its dump Job (a BeforeDelete hook) and deletes
// nothing while it runs (the nodes are tainted, so that its pod waits to be scheduled): the
// server and its data claim are still there, not terminating, and the PostgreSQL says what it
// waits for. Once the taint goes, kwok completes the Job, and the PostgreSQL and its objects go;
// the dump claim stays, released for a PostgreSQL of the same name to adopt.
func TestHooks_DatabaseDumpedBeforeDelete(t *testing.T) {
	ns := local.Namespace(t)
	startManager(t, ns, "e2e")
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	g.Spec.Database.Managed = &giteav1alpha1.ManagedDatabaseSpec{Storage: giteav1alpha1.StorageSpec{DeletionPolicy: giteav1alpha1.StorageDelete}}
	if err := cl.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	waitGiteaReady(t, client.ObjectKeyFromObject(g), readyTimeout)
	const pgName = "demo-postgresql"
	dumpClaim, dumpJob, dataClaim := postgresql.DumpClaimName(pgName), postgresql.DumpJobName(pgName), postgresql.DataClaimName(pgName)
	if got := keptState(t.Context(), ns, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: dumpClaim}}); got != "kept" {
		t.Fatalf("dump claim %s: %s, want kept", dumpClaim, got)
	}
	if present(t.Context(), ns, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: dumpJob}}) != "" {
		t.Fatal("the dump Job ran while the PostgreSQL lives")
	}

	const taint = "kdag-e2e/hold-dump"
	taintNodes(t, taint)
	if err := cl.Delete(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	pg := &giteav1alpha1.PostgreSQL{}
	poll.Until(t, "the PostgreSQL waits for its dump", readyTimeout, func(ctx context.Context) string {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: pgName}, pg); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(pg.Status.Conditions, kdagv1alpha1.ConditionBeforeDelete)
		if c == nil || c.Reason != kdagv1alpha1.ReasonBeforeDeleteRunning {
			return fmt.Sprintf("BeforeDelete condition %+v", c)
		}
		if !strings.Contains(c.Message, "Job "+ns+"/"+dumpJob) {
			return "condition message " + c.Message
		}
		return ""
	})
	// The hook runs before anything of the PostgreSQL is deleted.
	for _, obj := range []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: pgName}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: dataClaim}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: postgresql.CredentialsSecretName(pgName)}},
	} {
		got := get(t, ns, obj.GetName(), obj)
		if !got.GetDeletionTimestamp().IsZero() {
			t.Errorf("%T %s is being deleted while the dump runs", obj, obj.GetName())
		}
	}

	untaintNodes(t, taint)
	poll.Until(t, "the PostgreSQL and its data are gone", readyTimeout, func(ctx context.Context) string {
		return present(ctx, ns, &giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Name: pgName}},
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: pgName}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: dataClaim}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: dumpJob}})
	})
	kept := get(t, ns, dumpClaim, &corev1.PersistentVolumeClaim{})
	if !kept.DeletionTimestamp.IsZero() || len(kept.OwnerReferences) != 0 || kept.Labels[kdagv1alpha1.LabelOwnerUID] != "" ||
		kept.Annotations[kdagv1alpha1.AnnotationAdopt] != "PostgreSQL/"+pgName {
		t.Errorf("dump claim after the deletion: owners %v labels %v annotations %v; want it released for PostgreSQL/%s",
			kept.OwnerReferences, kept.Labels, kept.Annotations, pgName)
	}
	var events eventsv1.EventList
	if err := cl.List(t.Context(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range events.Items {
		if e.Regarding.Kind == giteav1alpha1.PostgreSQLKind && e.Reason == kdagv1alpha1.ReasonBeforeDeleteCompleted {
			notes = append(notes, e.Note)
		}
	}
	if len(notes) == 0 || !strings.Contains(notes[0], "Job "+ns+"/"+dumpJob) {
		t.Errorf("BeforeDeleteCompleted events on the PostgreSQL: %q, want one naming the dump Job", notes)
	}
}
