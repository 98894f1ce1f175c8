package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/graph"
)

// deletionWindow is how long a deletion this process made of an owner is trusted over a cache
// that does not show it yet: far longer than a cache lags, short enough that an entry whose
// owner is never reconciled again here (gone at once, or another shard's) is soon dropped.
const deletionWindow = time.Minute

// Deletions are the owners that this process's reconcilers deleted (a parent's prune of a child
// owner, a teardown), or found gone on the API server (ownerGone), and whose deletion their own
// reconciler's cache may not show yet. A
// reconcile of such an owner from that stale cache, or one that was already running when the
// deletion was made, would create objects for an owner about to go (found by the crash explorer
// twice: a Valkey pruned by its Gitea got a new Deployment, deleted again a moment later). One
// value is shared by the reconcilers of one Setup; every reconciler has one.
type Deletions struct {
	mu   sync.Mutex
	uids map[types.UID]time.Time
}

// NewDeletions returns an empty record of deletions.
func NewDeletions() *Deletions { return &Deletions{uids: map[types.UID]time.Time{}} }

// Record notes that this process deleted the object id with uid now, when it is a custom
// resource (only those can be another reconciler's owners: a teardown of many built-in objects
// records nothing), and drops entries older than deletionWindow.
func (d *Deletions) Record(id graph.NodeID, uid types.UID) {
	if d == nil || uid == "" || clientgoscheme.Scheme.IsGroupRegistered(id.Group) {
		return
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for u, at := range d.uids {
		if now.Sub(at) > deletionWindow {
			delete(d.uids, u)
		}
	}
	d.uids[uid] = now
}

// deleted reports whether this process deleted the object of uid within deletionWindow, whatever
// any cache shows: a reconcile that began before that deletion asks it before it creates
// anything, and before it writes the owner's status.
func (d *Deletions) deleted(uid types.UID) bool {
	if d == nil || uid == "" {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.uids[uid]
	return ok && time.Since(at) <= deletionWindow
}

// unseen reports whether this process deleted owner within deletionWindow while owner, as read,
// shows no deletion yet: its reader is behind this process's own write. An owner that shows its
// deletion is forgotten.
func (d *Deletions) unseen(owner client.Object) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.uids[owner.GetUID()]
	switch {
	case !ok:
		return false
	case owner.GetDeletionTimestamp() != nil || time.Since(at) > deletionWindow:
		delete(d.uids, owner.GetUID())
		return false
	}
	return true
}
