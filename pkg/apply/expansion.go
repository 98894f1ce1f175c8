package apply

import (
	"fmt"
	"strings"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// expansionRefusal is the wording of the API server's PersistentVolumeClaimResize admission
// plugin (k8s.io/kubernetes plugin/pkg/admission/storage/persistentvolume/resize, the same in
// v1.34 to v1.37) when a claim's storage request grows but its StorageClass does not allow volume
// expansion.
const expansionRefusal = "storageclass that provisions the pvc must support resize"

// VolumeExpansionForbidden reports whether err is the API server refusing to grow a
// PersistentVolumeClaim's spec.resources.requests.storage because the claim's StorageClass does
// not set allowVolumeExpansion: true (or the claim has no class): 403 Forbidden from the
// PersistentVolumeClaimResize admission plugin, enabled by default. A claim that is not bound yet
// is refused with another message ("Only bound persistent volume claims can be expanded"): that
// one passes once the claim binds, and this function returns false for it.
func VolumeExpansionForbidden(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return false
	}
	return strings.Contains(status.Status().Message, expansionRefusal)
}

// VolumeExpansionError is an apply that grows a PersistentVolumeClaim the API server refused
// because its StorageClass does not allow volume expansion (VolumeExpansionForbidden). Neither a
// retry nor the owner's spec can fix it (a claim never shrinks, so the spec cannot go back): an
// administrator must allow expansion on the class. The claim keeps its size and its data.
type VolumeExpansionError struct {
	// Object names the claim: "PersistentVolumeClaim namespace/name".
	Object string
	// Err is the API server's error.
	Err error
}

func (e *VolumeExpansionError) Error() string {
	return fmt.Sprintf("%s: cannot grow, its StorageClass does not allow volume expansion: set allowVolumeExpansion: true "+
		"on the StorageClass (the claim keeps its size and data until then)", e.Object)
}

func (e *VolumeExpansionError) Unwrap() error { return e.Err }
