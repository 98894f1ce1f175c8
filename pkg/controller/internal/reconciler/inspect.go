package reconciler

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller/internal/referenced"
)

// What kdag's own tests look at inside a Reconciler (pkg/controller's export_test.go passes them
// on to its external tests). Nothing else calls these.

// Engine returns c's apply engine.
func (c *Reconciler) Engine() *apply.Engine { return c.engine }

// SetEngine replaces c's apply engine by e.
func (c *Reconciler) SetEngine(e *apply.Engine) { c.engine = e }

// Clients returns c's client (writes, cached reads) and its uncached reader.
func (c *Reconciler) Clients() (client.Client, client.Reader) { return c.client, c.reader }

// References returns c's cache of the objects of Graph.Reference and ProtectsData nodes.
func (c *Reconciler) References() *referenced.Cache { return c.refs }

// WrittenStatuses returns how many owners c holds a record of its last status write for
// (writtenStatus): those whose write the cache has not shown yet.
func (c *Reconciler) WrittenStatuses() int {
	n := 0
	c.written.Range(func(any, any) bool { n++; return true })
	return n
}

// CachedRevisions returns owner's revisions as a reconcile lists them from the cache, and
// whether that list is a lookup in the cache's owner index (indexRevisions) rather than a scan.
func (c *Reconciler) CachedRevisions(ctx context.Context, owner client.Object) ([]appsv1.ControllerRevision, bool, error) {
	revs, err := c.listRevisions(ctx, owner, false)
	return revs, c.revisionsIndexed, err
}
