package apply_test

import (
	"testing"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kdag-dev/kdag/pkg/apply"
)

// TestVolumeExpansionForbidden tells the PersistentVolumeClaimResize admission's refusal of a
// StorageClass without volume expansion (only an administrator helps) from the other refusals
// of a claim's apply, which a retry or the owner's spec can fix. The wordings are the API
// server's (k8s.io/kubernetes plugin/pkg/admission/storage/persistentvolume/resize, RBAC's
// authorizer); TestStorageGrowth in controllers/postgresql gets the real one from kube-apiserver.
func TestVolumeExpansionForbidden(t *testing.T) {
	claims := schema.GroupResource{Resource: "persistentvolumeclaims"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"class does not allow expansion", apierrors.NewForbidden(claims, "data",
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")), true},
		{"wrapped", errors.Wrap(apierrors.NewForbidden(claims, "data",
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")), "apply"), true},
		{"claim not bound yet: passes once bound", apierrors.NewForbidden(claims, "data",
			errors.New("Only bound persistent volume claims can be expanded")), false},
		{"RBAC", apierrors.NewForbidden(claims, "data",
			errors.New(`User "system:serviceaccount:kdag:kdag" cannot patch resource "persistentvolumeclaims"`)), false},
		{"validation", apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, "data",
			field.ErrorList{field.Forbidden(field.NewPath("spec"), "spec is immutable after creation")}), false},
		{"other error", errors.New("connection refused"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := apply.VolumeExpansionForbidden(tc.err); got != tc.want {
				t.Errorf("VolumeExpansionForbidden(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	err := &apply.VolumeExpansionError{Object: "PersistentVolumeClaim ns/data", Err: errors.New("forbidden")}
	if msg := err.Error(); msg != "PersistentVolumeClaim ns/data: cannot grow, its StorageClass does not allow volume expansion: "+
		"set allowVolumeExpansion: true on the StorageClass (the claim keeps its size and data until then)" {
		t.Errorf("Error() = %q", msg)
	}
}
