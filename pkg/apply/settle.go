package apply

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// recreations remembers the objects the engine deleted to re-create them (Policy.Recreate), so
// that the new object is created only once the old one has been gone for Options.RecreateSettle.
//
// Why: the StatefulSet controller writes the status of a StatefulSet that is being deleted (an
// orphaning deletion bumps its generation), and when that write conflicts it retries on the
// object of the same name its informer holds by then. If that is already the new StatefulSet,
// the new object gets the old one's status, with an observedGeneration above its own generation;
// the controller never writes it again while its other fields agree (kube-controller-manager
// v1.37, stateful_set_status_updater.go; the symptom is kubernetes/kubernetes#126432), so
// kstatus, and kdag, wait forever. Found by test/e2e/controlplane's operator-killed-during-
// Recreate fault, which re-creates 20 StatefulSets at once: 3 of them stuck in one run on a
// loaded machine, all created again within 260 ms of the old one's deletion.
//
// The engine remembers what it deleted, so a process that restarts between the deletion and the
// creation would create at once. Node.Existed closes that: an absent object that the owner's
// last status listed as applied is taken as gone since the engine first found it so (goneUnseen).
type recreations struct {
	mu      sync.Mutex
	objects map[string]recreation // by objectKey
}

// recreation is one object the engine deleted, or found gone, to re-create it.
type recreation struct {
	deleted time.Time // when the engine deleted it (or found it gone), to forget it after recreationMemory
	gone    time.Time // when the engine first found it gone; zero: not yet
	settled bool      // the wait is over: created at once until the engine deletes it again
}

// recreationMemory is how long an entry is kept for an object whose owner never asks again.
const recreationMemory = 10 * time.Minute

func objectKey(u *unstructured.Unstructured) string {
	return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// deletedAt records that the engine deleted the object of key to re-create it.
func (r *recreations) deletedAt(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(now)
	r.objects[key] = recreation{deleted: now}
}

// goneUnseen records that the object of key, which existed before (Node.Existed), is gone
// although the engine did not delete it: deleted by a process before this one, in the middle of
// its re-creation, or by someone else. Its wait starts now. An object the engine already
// remembers (deleted, waiting or settled) is left as it is, so that a cache that has not seen
// the new object yet does not start a second wait.
func (r *recreations) goneUnseen(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(now)
	if _, ok := r.objects[key]; !ok {
		r.objects[key] = recreation{deleted: now, gone: now}
	}
}

// forget drops the entries older than recreationMemory; r.mu is held.
func (r *recreations) forget(now time.Time) {
	if r.objects == nil {
		r.objects = map[string]recreation{}
	}
	for k, o := range r.objects {
		if now.Sub(o.deleted) > recreationMemory {
			delete(r.objects, k)
		}
	}
}

// settling returns how much longer the creation of the object of key waits: zero when the engine
// did not delete it to re-create it (nor found it gone), or when it has been gone for settle
// (then it is settled). The first call that finds it gone starts the wait.
func (r *recreations) settling(key string, now time.Time, settle time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.objects[key]
	if !ok || o.settled {
		return 0
	}
	if o.gone.IsZero() {
		o.gone = now
		r.objects[key] = o
	}
	if left := settle - now.Sub(o.gone); left > 0 {
		return left
	}
	o.settled = true
	r.objects[key] = o
	return 0
}
