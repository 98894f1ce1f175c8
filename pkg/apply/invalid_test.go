package apply_test

import (
	"testing"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kdag-dev/kdag/pkg/apply"
)

// TestIsInvalid_ServerAllocationFailureIsNotTheObjects: kube-apiserver v1.36+ answers a Service
// whose cluster IP it could not allocate (etcd unavailable) with 422 Invalid on spec.clusterIPs,
// "failed to allocate IP: <cause>". That is the server's failure, retried, not the object's
// (before the fix the owner was Stalled, "change the owner's spec", seen with etcd killed under a
// fleet of Giteas in test/e2e/controlplane). A Service asking for a taken IP, or any other field
// error beside it, stays the object's.
func TestIsInvalid_ServerAllocationFailureIsNotTheObjects(t *testing.T) {
	svc := schema.GroupKind{Kind: "Service"}
	clusterIPs := field.NewPath("spec", "clusterIPs")
	alloc := field.Invalid(clusterIPs, []string{""}, "failed to allocate IP: rpc error: code = Unavailable desc = error reading from server: EOF")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"the allocator failing", apierrors.NewInvalid(svc, "web", field.ErrorList{alloc}), false},
		{"the allocator failing, wrapped", errors.Wrap(apierrors.NewInvalid(svc, "web", field.ErrorList{alloc}), "apply"), false},
		{"a requested IP taken", apierrors.NewInvalid(svc, "web", field.ErrorList{
			field.Invalid(clusterIPs, []string{"10.0.0.5"}, "failed to allocate IP 10.0.0.5: provided IP is already allocated")}), true},
		{"the allocator failing and a bad port", apierrors.NewInvalid(svc, "web", field.ErrorList{
			alloc, field.Invalid(field.NewPath("spec", "ports").Index(0).Child("port"), 0, "must be between 1 and 65535")}), true},
		{"a bad port", apierrors.NewInvalid(svc, "web", field.ErrorList{
			field.Invalid(field.NewPath("spec", "ports").Index(0).Child("port"), 0, "must be between 1 and 65535")}), true},
		{"an allocation message on another field", apierrors.NewInvalid(svc, "web", field.ErrorList{
			field.Invalid(field.NewPath("spec", "ports"), 0, "failed to allocate IP: x")}), true},
		{"a 500", apierrors.NewInternalError(errors.New("failed to allocate a serviceIP")), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := apply.IsInvalid(tt.err); got != tt.want {
				t.Errorf("IsInvalid(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
