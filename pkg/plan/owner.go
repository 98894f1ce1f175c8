package plan

import (
	"context"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kdag-dev/kdag/pkg/apply"
)

// planFieldManager is the field manager of the live plan's dry runs of an owner's own spec: the
// user applies the file, not the operator.
const planFieldManager = "kdag-plan"

// OwnerRefusedError is the API server's refusal of an owner's own spec, found by DryRunOwner:
// its validation (the CRD's schema and CEL rules, an immutable field among them), or an
// admission webhook. Applying the file would fail on the owner, so nothing under it is planned.
type OwnerRefusedError struct {
	// Owner is "Kind namespace/name".
	Owner string
	// Err is the API server's error; its message says which fields and why.
	Err error
}

func (e *OwnerRefusedError) Error() string {
	return "the API server refuses " + e.Owner + ": " + e.Err.Error()
}

func (e *OwnerRefusedError) Unwrap() error { return e.Err }

// AsOwnerRefused returns the *OwnerRefusedError in err's chain, if any.
func AsOwnerRefused(err error) (*OwnerRefusedError, bool) {
	var refused *OwnerRefusedError
	ok := errors.As(err, &refused)
	return refused, ok
}

// DryRunOwner asks the API server, with a server-side dry run (client.DryRunAll), whether it
// accepts owner as Resolve returns it: an update of the owner the cluster holds (owner's
// resourceVersion, its managedFields left to the server), or a create when owner is new (the
// placeholder UID of Decode). The server runs its defaulting, its validation (CEL transition
// rules against the stored owner included) and its admission webhooks; nothing is written.
//
// It returns nil when the server accepts it, or when a new owner's namespace does not exist yet
// (nothing can be checked; its objects' creates say so); an *OwnerRefusedError when the server's
// validation or admission refuses it (422 Invalid, 400 BadRequest, a webhook's denial); other
// errors (RBAC, a conflict, the connection) wrapped with the owner's name.
func (p *Planner) DryRunOwner(ctx context.Context, c client.Writer, owner client.Object) error {
	gvk, err := apiutil.GVKForObject(owner, p.scheme)
	if err != nil {
		return errors.WithStack(err)
	}
	name := title(gvk, owner)
	obj, ok := owner.DeepCopyObject().(client.Object)
	if !ok {
		return errors.Errorf("%s: %T is not a client.Object", name, owner)
	}
	obj.SetManagedFields(nil)
	if owner.GetUID() == placeholderUID {
		obj.SetUID("")
		obj.SetResourceVersion("")
		err = c.Create(ctx, obj, client.DryRunAll, client.FieldOwner(planFieldManager))
		if apierrors.IsNotFound(err) {
			return nil
		}
	} else {
		err = c.Update(ctx, obj, client.DryRunAll, client.FieldOwner(planFieldManager))
	}
	switch {
	case err == nil:
		return nil
	case refusal(err):
		return &OwnerRefusedError{Owner: name, Err: err}
	}
	return errors.Wrapf(err, "dry run %s", name)
}

// refusal reports whether err is the API server's refusal of an object's content: its
// validation (422 Invalid), a body it cannot decode (400 BadRequest), or an admission webhook's
// denial.
func refusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsForbidden(err) && apply.DeniedByAdmission(status.Status().Message)
}
