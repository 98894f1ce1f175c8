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
type recreations struct {
	mu      sync.Mutex
	objects map[string]recreation // by objectKey
}

// recreation is one object the engine deleted to re-create it.
type recreation struct {
	deleted time.Time // when the engine deleted it, to forget it if its owner never asks again
	gone    time.Time // when the engine first found it gone; zero: not yet
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
	if r.objects == nil {
		r.objects = map[string]recreation{}
	}
	for k, o := range r.objects {
		if now.Sub(o.deleted) > recreationMemory {
			delete(r.objects, k)
		}
	}
	r.objects[key] = recreation{deleted: now}
}

// settling returns how much longer the creation of the object of key waits: zero when the engine
// did not delete it to re-create it, or when it has been gone for settle (then it is forgotten).
// The first call that finds it gone starts the wait.
func (r *recreations) settling(key string, now time.Time, settle time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.objects[key]
	if !ok {
		return 0
	}
	if o.gone.IsZero() {
		o.gone = now
		r.objects[key] = o
	}
	if left := settle - now.Sub(o.gone); left > 0 {
		return left
	}
	delete(r.objects, key)
	return 0
}
