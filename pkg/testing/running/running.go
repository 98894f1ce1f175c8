// Package running runs a controller-runtime manager for the length of a test: the start, the
// stop and the error that every test of a manager needs, in one place.
package running

import (
	"context"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Manager starts mgr in a goroutine and returns stop, which cancels it and waits until Start has
// returned; stop is safe to call more than once and runs when the test ends in any case. An error
// from Start fails t (t.Errorf: the test goes on to its cleanup).
func Manager(t testing.TB, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
