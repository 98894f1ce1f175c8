package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ImmutableFields returns the fields an apply error says cannot change on an existing object,
// sorted and distinct, or nil when err is not such a refusal. The API server refuses such a
// change with 422 Invalid and a cause per field: "field is immutable" (a Job's template, a
// Service's clusterIP, a Deployment's selector, a PersistentVolumeClaim's spec beyond its
// requests), "may not change once set", or, for a StatefulSet, a Forbidden cause saying which
// fields updates may touch (its volumeClaimTemplates, serviceName, selector...). Those are the wordings of
// k8s.io/apimachinery's ValidateImmutableField and of the StatefulSet validation in
// k8s.io/kubernetes/pkg/apis/apps/validation; other refusals (a value out of range) return nil.
func ImmutableFields(err error) []string {
	if !IsInvalid(err) {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		msg := strings.ToLower(c.Message)
		immutable := strings.Contains(msg, "immutable") || strings.Contains(msg, "may not change once set") ||
			c.Type == metav1.CauseType(field.ErrorTypeForbidden) && strings.Contains(msg, "updates to") && strings.Contains(msg, "are forbidden")
		if immutable && c.Field != "" && !slices.Contains(fields, c.Field) {
			fields = append(fields, c.Field)
		}
	}
	slices.Sort(fields)
	return fields
}

// ImmutableFieldError is an apply the API server refused because it changes fields that cannot
// change on an existing object (ImmutableFields). It is terminal: the owner is Stalled until its
// spec changes back, or until the node may re-create the object (a Recreate policy).
type ImmutableFieldError struct {
	// Object names the object: "Kind namespace/name".
	Object string
	// Fields are the refused fields, as the API server names them (spec.volumeClaimTemplates).
	Fields []string
	// Err is the API server's error; errors.As finds its status through it.
	Err error
}

func (e *ImmutableFieldError) Error() string {
	what := "field " + e.Fields[0] + " is"
	if len(e.Fields) > 1 {
		what = "fields " + strings.Join(e.Fields, ", ") + " are"
	}
	return fmt.Sprintf("%s: %s immutable and the desired object changes it: change the owner's spec back, "+
		"or let kdag delete and re-create the object (node option Recreate)", e.Object, what)
}

func (e *ImmutableFieldError) Unwrap() error { return e.Err }

// recreate deletes live, whose update an immutable field refused, so that the next reconcile
// creates it as desired: only the same object (UID precondition) and only if it is still the
// version kdag read (resourceVersion precondition: a write by someone else in between makes the
// API server answer 409 Conflict, and the next reconcile decides again). propagation is the
// node's: Orphan keeps a StatefulSet's pods and claims while it is gone. An object already gone
// is not an error.
func (e *Engine) recreate(ctx context.Context, live client.Object, propagation metav1.DeletionPropagation) error {
	uid, rv := live.GetUID(), live.GetResourceVersion()
	err := e.client.Delete(ctx, live, client.PropagationPolicy(propagation),
		client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err == nil || apierrors.IsNotFound(err) {
		e.Forget(uid)
		return nil
	}
	return err
}
