package running

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// fakeManager is the part of a manager Manager uses: Start blocks until ctx ends and returns err.
type fakeManager struct {
	manager.Manager
	started chan struct{}
	err     error
}

func (f *fakeManager) Start(ctx context.Context) error {
	close(f.started)
	<-ctx.Done()
	return f.err
}

func TestManager_StopWaitsForStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := &fakeManager{started: make(chan struct{})}
	stop := Manager(t, f)
	<-f.started
	stop()
	stop() // a second stop is a no-op
}

// recordingTB records what Manager reports and the cleanups it registers.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func TestManager_StartErrorFailsTheTest(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := &recordingTB{TB: t}
	f := &fakeManager{started: make(chan struct{}), err: errors.New("boom")}
	Manager(r, f)
	<-f.started
	if len(r.cleanups) != 1 {
		t.Fatalf("%d cleanups registered, want the stop", len(r.cleanups))
	}
	r.cleanups[0]() // the test ends
	if len(r.errors) != 1 || r.errors[0] != "manager: boom" {
		t.Errorf("errors reported: %q, want the Start error", r.errors)
	}
}
