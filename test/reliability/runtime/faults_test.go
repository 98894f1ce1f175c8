package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/faults"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestAPIFaults_OwnersConvergeAndEveryFailureIsReported runs 100 owners through creation and a
// spec change while 10% of the manager's API requests fail, of every kind faults.AllKinds lists,
// half of the timeouts and resets after the API server did the work. Event writes are left
// alone: Kubernetes drops an event the API server rejects, and events are one of the two
// channels this test checks failures are reported on.
func TestAPIFaults_OwnersConvergeAndEveryFailureIsReported(t *testing.T) {
	const owners = 100
	ns := env.Namespace(t)
	widgets := record(t, ns, &testapi.WidgetList{})
	secrets := record(t, ns, &corev1.SecretList{})
	inj := faults.New(faults.Share(0.1), faults.Seed(7), faults.LostResponses(0.5), faults.BreakWatches(),
		faults.Filter(faults.NotEvents))
	logs := &logRecorder{}
	panicsBefore := reconcilePanics(t)
	goroutines := goleak.IgnoreCurrent()
	m := startManager(t, managerOptions{ns: ns, wraps: wraps(inj.Wrap), log: logs, maxConcurrent: 4})

	names := createWidgets(t, ns, "w", owners, testapi.WidgetSpec{Data: map[string]string{"greeting": "hello"}})
	created := waitAllReady(t, ns, owners, 3*time.Minute)
	atCreate := inj.Stats()

	for _, name := range names {
		w := &testapi.Widget{}
		w.Namespace, w.Name = ns, name
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"data":{"greeting":"hello again"}}}`))
		if err := env.Client.Patch(t.Context(), w, patch); err != nil {
			t.Fatalf("change Widget %s: %v", name, err)
		}
	}
	updated := waitAllReady(t, ns, owners, 3*time.Minute)

	// Afterwards: no more faults. Retries of reconciles that failed after the owners were all
	// Ready may still be queued; once they ran, every owner is Ready for its generation and
	// nothing is Stalled.
	inj.Disable()
	stats := inj.Stats()
	waitAllReady(t, ns, owners, time.Minute)
	for _, k := range faults.AllKinds() {
		if stats.Injected[k] == 0 {
			t.Errorf("no %s fault injected (%v): the test did not exercise it", k, stats.Injected)
		}
	}
	if stats.AfterServer == 0 {
		t.Errorf("no fault injected after the server did the work: lost responses not exercised")
	}
	t.Logf("faults: %d of %d eligible requests (%d seen) failed: %v; %d after the server served them, %d of those watch streams cut",
		stats.Total(), stats.Eligible, stats.Requests, stats.Injected, stats.AfterServer, stats.BrokenWatches)
	t.Logf("converged: %d owners Ready %s after creation (%d faults so far), again %s after a spec change",
		owners, created.Round(100*time.Millisecond), atCreate.Total(), updated.Round(100*time.Millisecond))

	failures, _ := logs.snapshot()
	if len(failures) == 0 {
		t.Fatal("no reconcile failed: the faults did not reach the Controller")
	}
	checkFailuresReported(t, ns, failures, widgets)
	checkNeverStalled(t, widgets)
	checkGeneratedSecretsWrittenOnce(t, secrets, owners)
	checkContent(t, ns, names, "hello again")

	m.stop()
	// Idle keep-alive connections belong to client-go's shared transport, not to the manager.
	if err := goleak.Find(goroutines, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")); err != nil {
		t.Errorf("goroutines left behind by the stopped manager: %v", err)
	}
	_, panics := logs.snapshot()
	if len(panics) > 0 {
		t.Errorf("the manager logged %d panics, first: %s", len(panics), panics[0])
	}
	if n := m.nodePanics(t); n != 0 {
		t.Errorf("kdag_node_panics_total = %v, want 0", n)
	}
	if n := reconcilePanics(t) - panicsBefore; n != 0 {
		t.Errorf("controller_runtime_reconcile_panics_total grew by %v, want 0", n)
	}
}

// checkFailuresReported checks that every failed reconcile the Controller logged is visible to
// a user: the owner's Reconciling condition carried the error ("retrying: <error>") in a status
// version the API server stored, or a Warning event about the owner carries it. Events are
// written asynchronously, so it waits for them.
//
// A failed status write is reported by a StatusWriteFailed event. client-go's events.k8s.io
// recorder folds an event into an earlier one about the same object with the same reason and
// action (the note is not part of the key) and only counts it in the earlier one's series, so
// a second status write failure of one owner shows as that event, with the first failure's note.
// Such a failure counts as reported when a StatusWriteFailed event about the owner exists.
func checkFailuresReported(t *testing.T, ns string, failures []failure, widgets *recorder) {
	t.Helper()
	var byCondition, byEventOnly int
	poll.Until(t, "every failed reconcile reported in a condition or a Warning event", 30*time.Second, func(ctx context.Context) string {
		conditions := map[string][]string{} // owner name -> Reconciling messages ever stored
		for _, ev := range widgets.snapshot() {
			w := ev.Object.(*testapi.Widget)
			if c := meta.FindStatusCondition(w.Status.Conditions, kdagv1alpha1.ConditionReconciling); c != nil {
				conditions[w.Name] = append(conditions[w.Name], c.Message)
			}
		}
		notes, statusEvents, err := warningNotes(ctx, ns)
		if err != nil {
			return err.Error()
		}
		byCondition, byEventOnly = 0, 0
		var missing []string
		for _, f := range failures {
			name := f.owner[strings.LastIndex(f.owner, "/")+1:]
			switch {
			case anyShows(conditions[name], f.err):
				byCondition++
			case anyShows(notes[name], f.err),
				strings.Contains(f.err, "write status: ") && slices.Contains(statusEvents[name], kdagv1alpha1.ReasonStatusWriteFailed):
				byEventOnly++
			default:
				missing = append(missing, fmt.Sprintf("%s: %s", f.owner, f.err))
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("%d of %d failures not reported, first: %s", len(missing), len(failures), missing[0])
		}
		return ""
	})
	t.Logf("failed reconciles: %d, reported in the Reconciling condition: %d, in a Warning event only: %d",
		len(failures), byCondition, byEventOnly)
}

// warningNotes returns the notes and the reasons of the Warning events in ns about each Widget,
// by name.
func warningNotes(ctx context.Context, ns string) (notes, reasons map[string][]string, err error) {
	list := &eventsv1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, nil, err
	}
	notes, reasons = map[string][]string{}, map[string][]string{}
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.Regarding.Kind == "Widget" {
			notes[e.Regarding.Name] = append(notes[e.Regarding.Name], e.Note)
			reasons[e.Regarding.Name] = append(reasons[e.Regarding.Name], e.Reason)
		}
	}
	return notes, reasons, nil
}

// anyShows reports whether one of the messages shows the error errMsg: it contains it, or is
// the start of it cut short ("..." at the end) by a length limit.
func anyShows(messages []string, errMsg string) bool {
	for _, m := range messages {
		m = strings.TrimPrefix(m, "retrying: ")
		if strings.Contains(m, errMsg) {
			return true
		}
		if cut, ok := strings.CutSuffix(m, "..."); ok && len(cut) > 0 && strings.HasPrefix(errMsg, cut) {
			return true
		}
	}
	return false
}

// checkNeverStalled checks that no stored status of any owner was ever Stalled: API failures
// are transient and must be retried, never reported as needing a change of the owner.
func checkNeverStalled(t *testing.T, widgets *recorder) {
	t.Helper()
	for _, ev := range widgets.snapshot() {
		w := ev.Object.(*testapi.Widget)
		if c := meta.FindStatusCondition(w.Status.Conditions, kdagv1alpha1.ConditionStalled); c != nil && c.Status == "True" {
			t.Errorf("Widget %s was Stalled (%s: %s) by a transient API failure", w.Name, c.Reason, c.Message)
			return
		}
	}
}

// checkGeneratedSecretsWrittenOnce checks that each of the want generated Secrets was created
// once and never changed or deleted: a create-only node is never written again, even when the
// response to its creation was lost or the cache had not seen it yet.
func checkGeneratedSecretsWrittenOnce(t *testing.T, secrets *recorder, want int) {
	t.Helper()
	added := map[string]int{}
	for _, ev := range secrets.snapshot() {
		s := ev.Object.(*corev1.Secret)
		switch ev.Type {
		case watch.Added:
			added[s.Name]++
		case watch.Modified, watch.Deleted:
			t.Errorf("generated Secret %s was %s after its creation", s.Name, strings.ToLower(string(ev.Type)))
		}
	}
	if len(added) != want {
		t.Errorf("%d generated Secrets created, want %d", len(added), want)
	}
}

// checkContent checks that every owner's ConfigMap holds the owner's last spec.
func checkContent(t *testing.T, ns string, names []string, greeting string) {
	t.Helper()
	for _, name := range names {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name + "-config"}, cm); err != nil {
			t.Errorf("get ConfigMap %s-config: %v", name, err)
			continue
		}
		if cm.Data["greeting"] != greeting {
			t.Errorf("ConfigMap %s-config greeting = %q, want %q", name, cm.Data["greeting"], greeting)
		}
	}
}

// reconcilePanics returns controller-runtime's count of recovered reconcile panics of the
// "widget" controllers of this process.
func reconcilePanics(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_panics_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controllerName {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
