package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestRestart_MidReconcile_NothingRedoneNothingLost kills the operator in the middle of the
// first reconcile of a large owner (84 objects, 41 of them generated Secrets) while 9 smaller
// owners wait in the queue, changes the large owner while no operator runs, and starts a new
// operator. The new one must finish every owner, prune only what the change removed, and leave
// everything the first one made as it was: same UID (not deleted and re-created), same
// resourceVersion (not rewritten), and for generated Secrets the same bytes.
func TestRestart_MidReconcile_NothingRedoneNothingLost(t *testing.T) {
	const bigComponents, small, smallComponents = 40, 9, 3
	ns := env.Namespace(t)
	var comps []string
	for i := range bigComponents {
		comps = append(comps, fmt.Sprintf("c%02d", i))
	}
	total := nodesPerOwner(bigComponents) + small*nodesPerOwner(smallComponents)

	crash := newCrash()
	// One worker: the large owner's reconcile runs alone, so the crash is inside it. At most 8
	// of its nodes at once: the crash cancels the writes in flight with the process, and with
	// the default 64 all of the first 40 could be in flight at the 40th (0 objects written,
	// which happened under load).
	first := newManager(t, managerOptions{ns: ns, wraps: crash.wraps(), allowStartError: true, maxParallelNodes: 8})
	first.start(t)
	// The 40th of the large owner's 84 applies never happens.
	crash.arm(40, first.cancel)
	big := createWidgets(t, ns, "big", 1, testapi.WidgetSpec{Data: map[string]string{"greeting": "hello"}, Components: comps})[0]
	poll.Until(t, "the large owner's reconcile applies its objects", time.Minute, func(context.Context) string {
		if crash.writes.Load() == 0 {
			return "no apply yet"
		}
		return ""
	})
	createWidgets(t, ns, "w", small, testapi.WidgetSpec{Data: map[string]string{"greeting": "hello"}, Components: comps[:smallComponents]})
	crash.wait(t, 2*time.Minute)
	first.stop()

	before := children(t, ns)
	if n := ownedBy(before, big); n == 0 || n >= nodesPerOwner(bigComponents) {
		t.Fatalf("%d of the large owner's %d objects exist after the crash: want the crash in the middle of its reconcile (refused writes, not counted: %v)",
			n, nodesPerOwner(bigComponents), crash.refusals())
	}

	// While no operator runs, the large owner loses its last component: its two objects, if
	// the first operator made them, are the only ones that should go.
	last := comps[len(comps)-1]
	changed := &testapi.Widget{}
	changed.Namespace, changed.Name = ns, big
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"components": comps[:len(comps)-1]}})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(t.Context(), changed, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	removed := map[string]bool{"ConfigMap/" + big + "-" + last: true, "Secret/" + big + "-" + last + "-key": true}

	second := startManager(t, managerOptions{ns: ns, maxConcurrent: 2})
	took := waitAllReady(t, ns, 1+small, 2*time.Minute)
	after := children(t, ns)
	second.stop()

	if want := total - len(removed); len(after) != want {
		t.Errorf("%d objects after the restart, want %d", len(after), want)
	}
	var rewritten, recreated, lost, secretsKept int
	for key, old := range before {
		now, ok := after[key]
		switch {
		case removed[key]:
			if ok {
				t.Errorf("%s: still there, but its owner no longer has that component", key)
			}
			continue
		case !ok:
			lost++
			t.Errorf("%s: deleted by the new operator", key)
			continue
		case now.GetUID() != old.GetUID():
			recreated++
			t.Errorf("%s: deleted and re-created (UID %s, was %s)", key, now.GetUID(), old.GetUID())
		case now.GetResourceVersion() != old.GetResourceVersion():
			rewritten++
			t.Errorf("%s: rewritten by the new operator (resourceVersion %s, was %s)", key, now.GetResourceVersion(), old.GetResourceVersion())
		}
		if s, isSecret := old.(*corev1.Secret); isSecret {
			if !sameData(s.Data, now.(*corev1.Secret).Data) {
				t.Errorf("%s: generated data changed across the restart", key)
			} else {
				secretsKept++
			}
		}
	}
	t.Logf("crash after %d of %d objects (the large owner's %d of %d); the new operator made all %d owners Ready in %s; "+
		"%d generated Secrets kept byte for byte; of the objects made before, deleted %d, re-created %d, rewritten %d",
		len(before), total, ownedBy(before, big), nodesPerOwner(bigComponents), 1+small, took.Round(100*time.Millisecond),
		secretsKept, lost, recreated, rewritten)
}

// ownedBy counts the objects of owner name in objs: its own ("<name>-...") and its Service
// ("<name>").
func ownedBy(objs map[string]client.Object, name string) int {
	n := 0
	for key := range objs {
		obj := key[strings.Index(key, "/")+1:]
		if obj == name || strings.HasPrefix(obj, name+"-") {
			n++
		}
	}
	return n
}

// sameData reports whether two Secrets' data are byte-identical.
func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
