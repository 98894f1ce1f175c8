package reconciler

import (
	"testing"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestIsTerminal_OnlySpecErrorsAreTerminal (11): the API server's own validation and errors
// marked terminal are terminal; admission denials, RBAC, conflicts and other 400s are retried.
func TestIsTerminal_OnlySpecErrorsAreTerminal(t *testing.T) {
	status := func(code int32, reason metav1.StatusReason, msg string, causes ...metav1.StatusCause) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
			Details: &metav1.StatusDetails{Causes: causes},
		}}
	}
	field := metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.ports[0].port", Message: "must be between 1 and 65535"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"API server validation (422 with a field)", status(422, metav1.StatusReasonInvalid, `Service "x" is invalid: spec.ports[0].port: Invalid value: 0`, field), true},
		{"wrapped API server validation", errors.Wrap(status(422, metav1.StatusReasonInvalid, "invalid", field), "apply"), true},
		{"marked terminal by the author", reconcile.TerminalError(errors.New("bad spec")), true},
		{"failed object", &objectFailedError{Reason: "BackoffLimitExceeded"}, true},
		{"ValidatingAdmissionPolicy denial (422, no field)", status(422, metav1.StatusReasonInvalid,
			"ValidatingAdmissionPolicy 'no-x' with binding 'b' denied request: no", metav1.StatusCause{Message: "denied"}), false},
		{"webhook denial (400)", status(400, metav1.StatusReasonBadRequest, `admission webhook "policy.example.com" denied the request: no`), false},
		{"webhook denial (422 with a field)", status(422, metav1.StatusReasonInvalid, `admission webhook "policy.example.com" denied the request: no`, field), false},
		{"webhook denial (403)", status(403, metav1.StatusReasonForbidden, `admission webhook "policy.example.com" denied the request: no`), false},
		{"other 400", status(400, metav1.StatusReasonBadRequest, "the server rejected our request for an unknown reason"), false},
		{"RBAC", status(403, metav1.StatusReasonForbidden, `configmaps "x" is forbidden: User "kdag" cannot patch resource`), false},
		{"conflict", status(409, metav1.StatusReasonConflict, "the object has been modified"), false},
		{"422 without causes", status(422, metav1.StatusReasonInvalid, "invalid"), false},
		{"plain error", errors.New("connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isTerminal(tc.err); got != tc.want {
				t.Errorf("isTerminal(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
