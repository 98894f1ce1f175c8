package reconciler

import (
	"testing"

	"github.com/pkg/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
)

// TestOutcome_StalledRecheck: a node failed on something only an administrator can fix and no
// watch reports (a claim whose StorageClass does not allow it to grow) leaves the owner Stalled,
// yet is tried again after stalledRecheck; a terminal error of the owner's spec is not retried.
func TestOutcome_StalledRecheck(t *testing.T) {
	expansion := &apply.VolumeExpansionError{Object: "PersistentVolumeClaim ns/data", Err: errors.New("forbidden")}
	invalid := reconcile.TerminalError(errors.New("bad spec"))
	for _, tc := range []struct {
		name        string
		errs        []error
		wantReason  string
		wantErr     bool // a reconcile.TerminalError: never requeued
		wantRequeue bool
	}{
		{"volume expansion forbidden", []error{expansion}, kdagv1alpha1.ReasonVolumeExpansionForbidden, false, true},
		{"wrapped", []error{errors.Wrap(expansion, "node")}, kdagv1alpha1.ReasonVolumeExpansionForbidden, false, true},
		{"terminal spec error", []error{invalid}, kdagv1alpha1.ReasonObjectInvalid, true, false},
		// Both: Stalled on the first, and still rechecked (the expansion may be fixed first).
		{"spec error and expansion", []error{invalid, expansion}, kdagv1alpha1.ReasonObjectInvalid, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &outcome{}
			for _, err := range tc.errs {
				r.nodes = append(r.nodes, nodeResult{spec: &nodeSpec{}, state: kdagv1alpha1.NodeFailed, err: err})
			}
			r.summarize()
			if r.terminal == nil || r.reason != tc.wantReason {
				t.Errorf("terminal %v reason %q, want Stalled with %q", r.terminal, r.reason, tc.wantReason)
			}
			err := r.returnErr()
			if got := errors.Is(err, reconcile.TerminalError(nil)); got != tc.wantErr {
				t.Errorf("returnErr() = %v, want a terminal error: %v", err, tc.wantErr)
			}
			if got := r.requeueAfter == stalledRecheck; got != tc.wantRequeue {
				t.Errorf("requeueAfter = %s, want %s: %v", r.requeueAfter, stalledRecheck, tc.wantRequeue)
			}
			if r.allReady() {
				t.Error("allReady() = true for a failed node")
			}
		})
	}
}
