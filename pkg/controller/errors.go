package controller

import (
	"fmt"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// AdoptionError is a node's error when its object exists but kdag did not create it for this
// owner. The object is left untouched.
type AdoptionError struct {
	// Node is the refused node.
	Node NodeID
	// Manager is a field manager of the existing object, when it has no kdag owner at all.
	Manager string
	// OtherOwnerUID is set when the object belongs to another kdag owner.
	OtherOwnerUID string
	// Annotation is the kdagv1alpha1.AnnotationAdopt value with which a user lets this owner adopt the object.
	Annotation string
}

func (e *AdoptionError) Error() string {
	if e.OtherOwnerUID != "" {
		return fmt.Sprintf("%s exists and belongs to another owner (UID %s): rename one of them, or annotate it %s=%s to hand it over",
			e.Node, e.OtherOwnerUID, kdagv1alpha1.AnnotationAdopt, e.Annotation)
	}
	return fmt.Sprintf("%s exists and was not created by kdag (field manager %q): delete it, or annotate it %s=%s "+
		"to let this owner adopt it", e.Node, e.Manager, kdagv1alpha1.AnnotationAdopt, e.Annotation)
}
