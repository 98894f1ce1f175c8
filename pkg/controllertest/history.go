package controllertest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
)

// objectStats is what a run did to the objects of one name ("Kind/name") in its namespace, as
// the crash explorer's invariants compare it between the clean run and a crash run.
type objectStats struct {
	// UIDs is how many objects had the name: more than one, it was deleted and created again.
	UIDs int
	// Data is how many different contents a Secret of the name had (its data), over all its UIDs.
	Data int
	// Generation is the highest metadata.generation seen: each spec change adds one.
	Generation int64
	// KeptDeleted counts the kept objects of the name (kdag.dev/resource-policy: keep or
	// kdag.dev/keep: "true" on the version deleted, or the last one seen before) deleted other
	// than by the test (Harness.Delete).
	KeptDeleted int
	// Reruns counts the Jobs of the name created after one of the name had completed.
	Reruns int
}

// isKept reports whether obj carries kdag's keep annotation or its alias.
func isKept(obj client.Object) bool {
	a := obj.GetAnnotations()
	return a[kdagv1alpha1.AnnotationResourcePolicy] == kdagv1alpha1.ResourcePolicyKeep || a[kdagv1alpha1.AnnotationKeep] == "true"
}

// history records every version of the objects of some kinds in one namespace, from watches, and
// sums them up into objectStats per name.
type history struct {
	// byTest reports whether the test itself deleted the object of a UID.
	byTest func(types.UID) bool

	mu      sync.Mutex
	objects map[string]*objectHistory
	byUID   map[types.UID]*uidHistory
	errs    []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// objectHistory is the history of one name.
type objectHistory struct {
	uids      []types.UID
	data      map[string]bool // hashes of a Secret's data
	completed bool            // a Job of the name completed
	stats     objectStats
}

// uidHistory is the history of one object.
type uidHistory struct {
	kept    bool // the last version seen is kept
	deleted bool
}

func newHistory(byTest func(types.UID) bool) *history {
	return &history{byTest: byTest, objects: map[string]*objectHistory{}, byUID: map[types.UID]*uidHistory{}}
}

// observe records one version of obj; deleted says it is the last (a watch's DELETED event).
func (hs *history) observe(obj *unstructured.Unstructured, deleted bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	key := obj.GetKind() + "/" + obj.GetName()
	oh := hs.objects[key]
	if oh == nil {
		oh = &objectHistory{data: map[string]bool{}}
		hs.objects[key] = oh
	}
	uid := obj.GetUID()
	uh := hs.byUID[uid]
	if uh == nil {
		uh = &uidHistory{}
		hs.byUID[uid] = uh
		oh.uids = append(oh.uids, uid)
		oh.stats.UIDs = len(oh.uids)
		if oh.completed {
			oh.stats.Reruns++
		}
	}
	// Kept is what the object's last version says: an owner may switch a node from Keep to
	// deletion (a storage deletionPolicy from Retain to Delete), and kdag then removes the
	// annotation before the object goes.
	uh.kept = isKept(obj)
	if obj.GetKind() == "Secret" && obj.GroupVersionKind().Group == corev1.GroupName {
		oh.data[dataHash(obj.Object["data"])] = true
		oh.stats.Data = len(oh.data)
	}
	oh.stats.Generation = max(oh.stats.Generation, obj.GetGeneration())
	if obj.GetKind() == "Job" && resources.JobComplete(obj) {
		oh.completed = true
	}
	if (deleted || obj.GetDeletionTimestamp() != nil) && !uh.deleted {
		uh.deleted = true
		if uh.kept && (hs.byTest == nil || !hs.byTest(uid)) {
			oh.stats.KeptDeleted++
		}
	}
}

// dataHash hashes a Secret's data: equal maps hash equal (json sorts keys).
func dataHash(data any) string {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Sprintf("unhashable: %v", err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// stats returns a copy of the sums per name, and the errors of the watches (a gap in the history).
func (hs *history) stats() (map[string]objectStats, []string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make(map[string]objectStats, len(hs.objects))
	for k, oh := range hs.objects {
		out[k] = oh.stats
	}
	return out, append([]string(nil), hs.errs...)
}

func (hs *history) fail(format string, args ...any) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.errs = append(hs.errs, fmt.Sprintf(format, args...))
}

// record starts a history of the objects of the harness's kinds in its namespace: a list, then a
// watch from the list's resourceVersion, opened again from the last version seen whenever the API
// server ends it. It returns an error when a kind cannot be listed or watched; stop ends it.
func (h *Harness) record() (*history, error) {
	kinds, err := h.kinds()
	if err != nil {
		return nil, err
	}
	wc, err := client.NewWithWatch(h.config, client.Options{Scheme: h.scheme})
	if err != nil {
		return nil, errors.Wrap(err, "watch client")
	}
	hs := newHistory(h.deletedByTest)
	ctx, cancel := context.WithCancel(context.Background())
	hs.cancel = cancel
	for _, gvk := range kinds {
		items, rv, err := h.list(ctx, gvk)
		if err != nil {
			hs.stop(h)
			return nil, err
		}
		for i := range items {
			hs.observe(&items[i], false)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		w, err := wc.Watch(ctx, list, client.InNamespace(h.Namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			hs.stop(h)
			return nil, errors.Wrapf(err, "watch %s in %s", gvk.Kind, h.Namespace)
		}
		hs.wg.Add(1)
		go hs.follow(ctx, wc, gvk, w, rv, h.Namespace)
	}
	return hs, nil
}

// follow records the events of w, and of the watches after it, until ctx ends.
func (hs *history) follow(ctx context.Context, wc client.WithWatch, gvk schema.GroupVersionKind, w watch.Interface, rv, ns string) {
	defer hs.wg.Done()
	for {
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					u.SetGroupVersionKind(gvk)
					rv = u.GetResourceVersion()
					hs.observe(u, ev.Type == watch.Deleted)
				}
			case watch.Error:
				if ctx.Err() == nil {
					hs.fail("watch of %s in %s: %v", gvk.Kind, ns, ev.Object)
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var err error
		w, err = wc.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			if ctx.Err() == nil {
				hs.fail("watch of %s in %s again from resourceVersion %s: %v", gvk.Kind, ns, rv, err)
			}
			return
		}
	}
}

// stop lists the harness's kinds a last time (a version a watch had not delivered yet is seen),
// then ends the watches and waits for them.
func (hs *history) stop(h *Harness) {
	if kinds, err := h.kinds(); err == nil {
		for _, gvk := range kinds {
			items, _, err := h.list(context.Background(), gvk)
			if err != nil {
				hs.fail("%v", err)
				continue
			}
			for i := range items {
				hs.observe(&items[i], false)
			}
		}
	}
	hs.cancel()
	hs.wg.Wait()
}

// compareStats returns what a crash run (got) did that the clean run (base) did not: an object
// deleted and created again more often (unless its "Kind/name" is in allowRecreated), a Secret's
// data changed more often, a spec written more often (a higher generation), a Job run again after
// it completed more often. Each problem names the object; they are sorted. Kept objects deleted
// are a failure of any run, checked by the run itself.
func compareStats(base, got map[string]objectStats, allowRecreated []string) []string {
	var problems []string
	for key, g := range got {
		b, inBase := base[key]
		if !inBase {
			b = objectStats{UIDs: 1, Data: 1, Generation: g.Generation}
		}
		if g.UIDs > b.UIDs && !contains(allowRecreated, key) {
			problems = append(problems, fmt.Sprintf("%s: deleted and created again: %d objects of the name, the clean run has %d", key, g.UIDs, b.UIDs))
		}
		if g.Data > b.Data {
			problems = append(problems, fmt.Sprintf("%s: data changed: %d different contents, the clean run has %d", key, g.Data, b.Data))
		}
		if g.Generation > b.Generation {
			problems = append(problems, fmt.Sprintf("%s: spec written more often: generation %d, the clean run ends at %d", key, g.Generation, b.Generation))
		}
		if g.Reruns > b.Reruns {
			problems = append(problems, fmt.Sprintf("%s: created again after it completed: %d times, the clean run %d", key, g.Reruns, b.Reruns))
		}
	}
	sort.Strings(problems)
	return problems
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
