package input

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
)

// TestConflict_ForeignObjectsNeverOverwritten: before the sample Gitea is created, someone else
// (field manager "helm") created the PostgreSQL's credentials Secret, with a password of their
// choosing, and the Valkey's ConfigMap. The nodes of those objects fail with the adoption error
// naming them, the objects stay byte-for-byte as they were (kdag writes them not once), the nodes
// that depend on them wait, the unrelated nodes are applied, and the Gitea says why it waits.
// Once the foreign objects are deleted, kdag creates its own and the Gitea becomes Ready.
func TestConflict_ForeignObjectsNeverOverwritten(t *testing.T) {
	t.Parallel()
	ns := local.Namespace(t)
	op := startOperator(t, []string{ns})
	ctx := t.Context()
	foreign := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-postgresql-credentials"},
			Data: map[string][]byte{"password": []byte("chosen-by-someone-else"), "user": []byte("postgres")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-valkey-config"},
			Data: map[string]string{"valkey.conf": "maxmemory 1gb\n"}},
	}
	for _, o := range foreign {
		if err := cl.Create(ctx, o, client.FieldOwner("helm")); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string][]byte{}
	for _, o := range foreign {
		before[o.GetName()] = marshalLive(t, o)
	}
	if err := cl.Create(ctx, sampleGitea(t, ns, "gitea.yaml")); err != nil {
		t.Fatal(err)
	}

	for _, c := range []reconcileCase{
		{name: "PostgreSQL refuses the foreign Secret", kind: "PostgreSQL", owner: "demo-postgresql",
			condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonNodeFailed,
			want: []string{"Secret " + ns + `/demo-postgresql-credentials exists and was not created by kdag (field manager "helm"): delete it, or annotate it kdag.dev/adopt=PostgreSQL/demo-postgresql to let this owner adopt it`}},
		{name: "Valkey refuses the foreign ConfigMap", kind: "Valkey", owner: "demo-valkey",
			condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonNodeFailed,
			want: []string{"ConfigMap " + ns + `/demo-valkey-config exists and was not created by kdag (field manager "helm")`}},
		{name: "the Gitea says why it waits", kind: "Gitea", owner: "demo",
			condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonWaiting,
			want: []string{"waiting for PostgreSQL " + ns + "/demo-postgresql (Secret " + ns + "/demo-postgresql-credentials exists and was not created by kdag",
				"Valkey " + ns + "/demo-valkey (ConfigMap " + ns + "/demo-valkey-config exists and was not created by kdag"}},
	} {
		poll.Until(t, c.name, readyTimeout, func(ctx context.Context) string { return c.check(ctx, ns) })
	}
	// Blocked dependents, applied independents: the graph summaries of both children.
	for _, o := range []struct{ kind, name, failed, blocked, applied string }{
		{"PostgreSQL", "demo-postgresql", "Secret/demo-postgresql-credentials", "StatefulSet/demo-postgresql", "Service/demo-postgresql"},
		{"Valkey", "demo-valkey", "ConfigMap/demo-valkey-config", "Deployment/demo-valkey", "Service/demo-valkey"},
	} {
		g := graphOf(t, o.kind, ns, o.name)
		if got := g[o.failed]; got != kdagv1alpha1.NodeFailed {
			t.Errorf("%s %s: node %s is %q, want Failed", o.kind, o.name, o.failed, got)
		}
		if got := g[o.blocked]; got != kdagv1alpha1.NodeBlocked {
			t.Errorf("%s %s: node %s is %q, want Blocked", o.kind, o.name, o.blocked, got)
		}
		if got := g[o.applied]; got != kdagv1alpha1.NodeReady {
			t.Errorf("%s %s: unrelated node %s is %q, want Ready (applied)", o.kind, o.name, o.applied, got)
		}
	}
	for _, o := range foreign {
		if after := marshalLive(t, o); !bytes.Equal(after, before[o.GetName()]) {
			t.Errorf("%T %s changed:\nbefore %s\nafter  %s", o, o.GetName(), before[o.GetName()], after)
		}
		path := objectPath(o)
		for _, verb := range []string{"PATCH", "PUT", "POST", "DELETE"} {
			if n := op.requests.Count(verb, path); n != 0 {
				t.Errorf("the operator sent %d %s to %s, which it did not create, and the server accepted them", n, verb, path)
			}
		}
		// What it sends instead is its conditional create, which the server refuses.
		t.Logf("%s: %d conditional creates refused by the API server", path, op.requests.CountRefused("PATCH", path))
	}

	// The owner of the objects removes them: kdag creates its own and the Gitea becomes Ready.
	for _, o := range foreign {
		if err := cl.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, "Gitea", ns, "demo")
	s := &corev1.Secret{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-postgresql-credentials"}, s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["password"]) == "chosen-by-someone-else" || s.Labels[kdagv1alpha1.LabelController] != "postgresql" {
		t.Errorf("credentials Secret after the foreign one was deleted: labels %v, password reused %v; want kdag's own, generated",
			s.Labels, string(s.Data["password"]) == "chosen-by-someone-else")
	}
}

// TestConflict_FieldFightIsBounded: a second field manager ("rogue-sync") force-applies its own
// valkey.conf to a Valkey's ConfigMap, whose data kdag owns, ten times a second. Without a limit
// (the behaviour before the drift budget) kdag reverts every write: a hot loop bounded only by
// the other writer. With the default budget kdag writes the ConfigMap at most DriftRepairLimit
// times, then pauses, says so in a Warning event DriftConflict naming the other field manager and
// the field, and the Valkey is Reconciling with reason DriftConflict.
func TestConflict_FieldFightIsBounded(t *testing.T) {
	t.Parallel()
	const (
		fightFor    = 20 * time.Second
		baselineFor = 8 * time.Second
	)
	// The unbounded baseline, on an operator without the limit.
	unbounded := fight(t, "unbounded", baselineFor, controller.Options{DriftRepairLimit: -1})
	t.Logf("without a limit: %d writes of the ConfigMap in %s (%.0f per minute)", unbounded.writes, baselineFor, perMinute(unbounded.writes, baselineFor))
	if unbounded.writes < 20 {
		t.Errorf("without a limit kdag wrote the ConfigMap %d times in %s; want at least 20: the fight did not happen", unbounded.writes, baselineFor)
	}

	bounded := fight(t, "bounded", fightFor)
	t.Logf("steady state: %d writes in %s; with the default budget: %d writes of the ConfigMap in %s (%.0f per minute) against %d writes by rogue-sync",
		bounded.quietWrites, quietFor, bounded.writes, fightFor, perMinute(bounded.writes, fightFor), bounded.rogueWrites)
	if bounded.quietWrites != 0 {
		t.Errorf("%d writes of the ConfigMap of a settled Valkey in %s, want none", bounded.quietWrites, quietFor)
	}
	// The default budget: 5 repairs within a minute, then a 30 s pause (longer than the fight).
	if bounded.writes > 5 {
		t.Errorf("kdag wrote the ConfigMap %d times during a %s fight, want at most 5 (the default DriftRepairLimit)", bounded.writes, fightFor)
	}
	if bounded.writes == 0 {
		t.Error("kdag never repaired the ConfigMap: the fight was not seen")
	}
	cmID := "ConfigMap " + bounded.ns + "/fight-config"
	want := []string{cmID + `: field manager "rogue-sync" keeps changing .data["valkey.conf"], owned by kdag-valkey`, "stop the other writer"}
	c := reconcileCase{name: "Valkey Reconciling with reason DriftConflict", kind: "Valkey", owner: "fight",
		condition: kdagv1alpha1.ConditionReconciling, reason: kdagv1alpha1.ReasonDriftConflict, want: want}
	if msg := c.check(t.Context(), bounded.ns); msg != "" {
		t.Errorf("%s: %s", c.name, msg)
	}
	note := ""
	for _, e := range bounded.events {
		if e.Reason == kdagv1alpha1.ReasonDriftConflict && e.Type == corev1.EventTypeWarning && e.Regarding.Name == "fight" {
			note = e.Note
		}
	}
	if !strings.Contains(note, want[0]) || !strings.Contains(note, "next repair attempt in") {
		t.Errorf("DriftConflict event %q, want it to name the other field manager and the field, and the pause", note)
	} else {
		t.Logf("event: Warning DriftConflict: %s", note)
	}
}

type fightResult struct {
	ns                               string
	quietWrites, writes, rogueWrites int
	events                           []eventsv1.Event
}

// quietFor is how long fight counts kdag's writes of the settled Valkey's ConfigMap before the
// fight starts.
const quietFor = 5 * time.Second

// fight runs an operator with opts on a new namespace with a Valkey "fight", waits until it is
// Ready, counts kdag's writes of its ConfigMap while nobody else writes for quietFor, then while
// field manager "rogue-sync" force-applies another valkey.conf every 100 ms for d.
func fight(t *testing.T, name string, d time.Duration, opts ...controller.Options) fightResult {
	t.Helper()
	ctx := t.Context()
	ns := local.Namespace(t)
	op := startOperator(t, []string{ns}, opts...)
	defer op.stop()
	if err := cl.Create(ctx, owner("Valkey", ns, "fight", map[string]any{"config": map[string]any{"maxmemory": "64mb"}})); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "Valkey", ns, "fight")
	path := "/api/v1/namespaces/" + ns + "/configmaps/fight-config"
	r := fightResult{ns: ns}

	start := op.requests.Count("PATCH", path)
	time.Sleep(quietFor)
	r.quietWrites = op.requests.Count("PATCH", path) - start

	start = op.requests.Count("PATCH", path)
	fightCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for i := 0; fightCtx.Err() == nil; i++ {
		cm := applycorev1.ConfigMap("fight-config", ns).WithData(map[string]string{"valkey.conf": fmt.Sprintf("maxmemory %dmb\n", 100+i%2)})
		if err := cl.Apply(fightCtx, cm, client.FieldOwner("rogue-sync"), client.ForceOwnership); err == nil {
			r.rogueWrites++
		}
		select {
		case <-fightCtx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.writes = op.requests.Count("PATCH", path) - start
	var err error
	if r.events, err = events(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return r
}

func perMinute(n int, d time.Duration) float64 { return float64(n) * float64(time.Minute) / float64(d) }

// graphOf returns the states of the nodes of the owner's status.graph, by "Kind/name".
func graphOf(t *testing.T, kind, ns, name string) map[string]kdagv1alpha1.NodeState {
	t.Helper()
	st := statusOf(t, kind, ns, name)
	out := map[string]kdagv1alpha1.NodeState{}
	if st.Graph != nil {
		for _, n := range st.Graph.Nodes {
			out[n.Kind+"/"+n.Name] = n.State
		}
	}
	return out
}

// marshalLive returns the live object's data (Secret data or ConfigMap data), labels and field
// managers, for a byte-for-byte comparison.
func marshalLive(t *testing.T, o client.Object) []byte {
	t.Helper()
	live := o.DeepCopyObject().(client.Object)
	if err := cl.Get(t.Context(), client.ObjectKeyFromObject(o), live); err != nil {
		if apierrors.IsNotFound(err) {
			return []byte("(deleted)")
		}
		t.Fatal(err)
	}
	var data any
	switch v := live.(type) {
	case *corev1.Secret:
		data = v.Data
	case *corev1.ConfigMap:
		data = v.Data
	}
	var managers []string
	for _, mf := range live.GetManagedFields() {
		managers = append(managers, mf.Manager+"/"+string(mf.Operation))
	}
	return fmt.Appendf(nil, "rv=%s data=%v labels=%v owners=%v managers=%v", live.GetResourceVersion(), data, live.GetLabels(),
		live.GetOwnerReferences(), managers)
}

// objectPath is the API path of a namespaced core object.
func objectPath(o client.Object) string {
	resource := "configmaps"
	if _, ok := o.(*corev1.Secret); ok {
		resource = "secrets"
	}
	return "/api/v1/namespaces/" + o.GetNamespace() + "/" + resource + "/" + o.GetName()
}
