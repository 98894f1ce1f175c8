package history

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/revision"
)

// FieldManager is the field manager of a rollback's write of the owner.
const FieldManager = "kubectl-kdag"

// Rollback is the rollback of Owner to the spec of Record.
type Rollback struct {
	// Planner plans the owner's graph with the rolled-back spec (the live plan).
	Planner *plan.Planner
	// Client reads the cluster and writes the owner (uncached).
	Client client.Client
	// Owner is the owner as the cluster holds it.
	Owner *unstructured.Unstructured
	// Record is the revision to roll back to.
	Record *revision.Record
	// Parallel bounds the live plan's requests in flight (0: 8).
	Parallel int
}

// RefusedError is a rollback that cannot work; nothing was written.
type RefusedError struct {
	// Owner is "Kind namespace/name"; Revision the revision asked for.
	Owner    string
	Revision int64
	// Reasons say why, each naming the object.
	Reasons []string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("rollback of %s to revision %d refused, nothing written: %s", e.Owner, e.Revision, strings.Join(e.Reasons, "; "))
}

// target is the owner with the revision's spec, the resourceVersion it was read at kept (the
// write fails with a conflict when the owner changed meanwhile).
func (rb *Rollback) target() *unstructured.Unstructured {
	return revision.WithSpec(rb.Owner, rb.Record.Spec)
}

// Check asks the API server, with dry runs only, whether the rollback can work, and returns the
// live plan of the owner with the revision's spec. It returns a *RefusedError when
//
//   - the API server refuses the owner with that spec (its CRD's rules: a version below one whose
//     migration finished, a claim size that would shrink, an immutable field);
//   - the live plan finds an object the API server would refuse (a child owner's own rules, a
//     claim that cannot shrink), or a PersistentVolumeClaim the reconcile would delete (re-create
//     or prune), which loses its data;
//
// and the errors of the dry runs and reads otherwise. A dry run that the API server answers with
// a conflict (the owner changed since it was read) is handled as Apply says: the owner is read
// again and the dry run made again when only its status or metadata changed.
func (rb *Rollback) Check(ctx context.Context) ([]plan.OwnerChanges, error) {
	title := titleOf(rb.Owner)
	refused := &RefusedError{Owner: title, Revision: rb.Record.Revision}
	var dry *unstructured.Unstructured
	for attempt := 1; ; attempt++ {
		dry = rb.target()
		err := client.NewDryRunClient(rb.Client).Update(ctx, dry, client.FieldOwner(FieldManager))
		if err == nil {
			break
		}
		switch {
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
			refused.Reasons = append(refused.Reasons, "the API server refuses "+title+" with that spec: "+apiMessage(err))
			return nil, refused
		case apierrors.IsConflict(err) && attempt < conflictAttempts:
			if err := rb.refresh(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		return nil, errors.Wrapf(err, "dry run of %s with the spec of revision %d", title, rb.Record.Revision)
	}
	owner, err := rb.typed(dry)
	if err != nil {
		return nil, err
	}
	changes, err := rb.Planner.Changes(ctx, client.NewDryRunClient(rb.Client), []client.Object{owner}, rb.Parallel)
	if err != nil {
		return nil, errors.Wrapf(err, "live plan of %s with the spec of revision %d", title, rb.Record.Revision)
	}
	for _, oc := range changes {
		for _, ch := range oc.Changes {
			name := ch.Kind + " " + ch.Namespace + "/" + ch.Name
			switch {
			case ch.Error != "":
				refused.Reasons = append(refused.Reasons, "the API server would refuse "+name+": "+ch.Error)
			case ch.Kind == "PersistentVolumeClaim" && (ch.Action == apply.Recreating || ch.Action == apply.Pruned):
				refused.Reasons = append(refused.Reasons, "the reconcile would delete "+name+" ("+planWord(ch.Action)+": "+ch.Reason+
					") and lose its data")
			}
		}
	}
	if len(refused.Reasons) > 0 {
		return changes, refused
	}
	return changes, nil
}

// typed converts the owner's content to its type in the planner's scheme.
func (rb *Rollback) typed(u *unstructured.Unstructured) (client.Object, error) {
	obj, err := rb.Client.Scheme().New(u.GroupVersionKind())
	if err != nil {
		return nil, errors.Wrapf(err, "%s: type", titleOf(u))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, errors.Wrapf(err, "%s: convert", titleOf(u))
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, errors.Errorf("%s: %T is not a client.Object", titleOf(u), obj)
	}
	co.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	return co, nil
}

// DryRun checks the rollback (Check) and writes what it would do: a header line, then the live
// plan of the owner with the revision's spec (plan.WriteChanges, text). Nothing is written to the
// cluster. A refused rollback writes the plan too, then returns the *RefusedError.
func (rb *Rollback) DryRun(ctx context.Context, out io.Writer) error {
	changes, err := rb.Check(ctx)
	var refused *RefusedError
	if err != nil && !errors.As(err, &refused) {
		return err
	}
	if changes != nil {
		fmt.Fprintf(out, "Rollback of %s to revision %d (generation %d, spec %s): dry run, nothing written\n\n",
			titleOf(rb.Owner), rb.Record.Revision, rb.Record.Generation, rb.Record.SpecHash)
		if werr := plan.WriteChanges(out, changes, plan.Text); werr != nil {
			return werr
		}
	}
	return err
}

// Apply checks the rollback (Check) and, unless refused, writes the owner with the revision's
// spec (an update conditional on the resourceVersion it was read at, field manager
// FieldManager); the owner's controller then reconciles it. It writes one line saying what it
// did. When the owner's status or metadata changed since it was read (its controller writes
// status while it works), it reads the owner again and checks and writes again, up to
// conflictAttempts times. It returns Check's errors, the update's, and an error saying to run
// the rollback again when the owner's spec changed meanwhile (its generation moved: someone
// else's change, which the rollback must not overwrite unseen) or it kept changing.
func (rb *Rollback) Apply(ctx context.Context, out io.Writer) error {
	title := titleOf(rb.Owner)
	if rb.specHash() == rb.Record.SpecHash {
		_, err := fmt.Fprintf(out, "%s already has the spec of revision %d: nothing to do\n", title, rb.Record.Revision)
		return errors.WithStack(err)
	}
	var target *unstructured.Unstructured
	for attempt := 1; ; attempt++ {
		if _, err := rb.Check(ctx); err != nil {
			return err
		}
		target = rb.target()
		err := rb.Client.Update(ctx, target, client.FieldOwner(FieldManager))
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) {
			return errors.Wrapf(err, "update %s with the spec of revision %d", title, rb.Record.Revision)
		}
		if attempt == conflictAttempts {
			return errors.Wrapf(err, "%s keeps changing while the rollback is checked: run it again", title)
		}
		if err := rb.refresh(ctx, err); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "%s rolled back to revision %d (spec %s): generation %d; its operator reconciles it now\n",
		title, rb.Record.Revision, rb.Record.SpecHash, target.GetGeneration())
	return errors.WithStack(err)
}

// conflictAttempts bounds the dry runs and updates of one Check or Apply that the API server
// answers with a conflict (the owner changed since it was read).
const conflictAttempts = 5

// refresh reads the owner again after the API server answered conflict to a write conditional on
// the resourceVersion it was read at. When only its status or metadata changed (the same
// generation: its controller wrote status meanwhile, which it does every few seconds while a
// migration runs), the rollback goes on with the owner as it is now. When its spec changed (the
// generation moved), it returns an error saying so: the user decides again on the new spec.
func (rb *Rollback) refresh(ctx context.Context, conflict error) error {
	title := titleOf(rb.Owner)
	now := &unstructured.Unstructured{}
	now.SetGroupVersionKind(rb.Owner.GroupVersionKind())
	if err := rb.Client.Get(ctx, client.ObjectKeyFromObject(rb.Owner), now); err != nil {
		return errors.Wrapf(err, "read %s again after a conflict", title)
	}
	if now.GetGeneration() != rb.Owner.GetGeneration() {
		return errors.Wrapf(conflict, "%s changed (generation %d, read at %d) while the rollback was checked: look at its spec and run the rollback again",
			title, now.GetGeneration(), rb.Owner.GetGeneration())
	}
	rb.Owner = now
	return nil
}

// specHash is the hash of the owner's spec as the Controller records it: of the typed owner.
func (rb *Rollback) specHash() string {
	owner, err := rb.typed(rb.Owner)
	if err != nil {
		return ""
	}
	spec, err := revision.Spec(owner)
	if err != nil {
		return ""
	}
	return revision.SpecHash(spec)
}

// apiMessage is the API server's message of err.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// planWord is the plan's word for a, the two actions that delete a claim: "Recreate" or "Prune".
func planWord(a apply.Action) string {
	if a == apply.Recreating {
		return "Recreate"
	}
	return "Prune"
}
