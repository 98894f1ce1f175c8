package apply

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/resources"
)

// ImmutableFields returns the fields an apply error says cannot change on an existing object,
// sorted and distinct, or nil when err is not such a refusal. An *ImmutableFieldError (what
// Engine.Apply returns) gives its Fields. Otherwise they are the fields the API server names: it
// refuses such a change with 422 Invalid and a cause per field, worded "field is immutable" (a
// Job's template, a Service's clusterIP, a Deployment's selector, a StatefulSet's
// volumeClaimTemplates from Kubernetes 1.37), "may not change once set", "spec is immutable after
// creation except ..." (a PersistentVolumeClaim's spec beyond its requests), or, for a StatefulSet up
// to Kubernetes 1.36, a Forbidden cause on "spec" itself: "updates to statefulset spec for fields
// other than 'replicas', ... are forbidden". Those are the wordings of k8s.io/apimachinery's
// ValidateImmutableField and of k8s.io/kubernetes's pkg/apis/apps/validation and
// pkg/apis/core/validation, v1.34 to v1.37; other refusals (a value out of range) return nil.
// Where the server names only a parent field ("spec"), ChangedImmutableFields names the fields
// the update changes.
func ImmutableFields(err error) []string { return ChangedImmutableFields(err, nil, nil) }

// ChangedImmutableFields is ImmutableFields for err, the refusal of an apply of desired over live
// (live as the cache holds it, typed or unstructured), with the fields the update changes in place
// of a parent the API server names with a list of its fields that may change: a StatefulSet's
// "spec" up to Kubernetes 1.36 (its message lists 'replicas', 'template', ...), a
// PersistentVolumeClaim's "spec" (all versions: "except resources.requests and
// volumeAttributesClassName"). Those are the fields below the parent that desired sets to a value
// live does not hold, less the listed ones (resources.ChangedFields): spec.volumeClaimTemplates on
// every supported version. The server's field stays when no such field is found (desired removes
// one, which the comparison cannot see), or desired or live is nil or cannot be read; nil when
// err is not an immutable-field refusal.
func ChangedImmutableFields(err error, desired *unstructured.Unstructured, live client.Object) []string {
	var refused *ImmutableFieldError
	if errors.As(err, &refused) {
		return refused.Fields
	}
	var fields []string
	for _, c := range immutableCauses(err) {
		named := []string{c.Field}
		if updatable, ok := updatableFields(c.Message); ok && desired != nil && live != nil {
			if changed, err := resources.ChangedFields(live, desired, c.Field, updatable); err == nil && len(changed) > 0 {
				named = changed
			}
		}
		for _, f := range named {
			if !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
	}
	slices.Sort(fields)
	return fields
}

// immutableCauses returns the causes of err, an API server's 422 Invalid, that refuse a change
// to a field that cannot change (see ImmutableFields), each with its field; nil for any other error.
func immutableCauses(err error) []metav1.StatusCause {
	if !IsInvalid(err) {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	var causes []metav1.StatusCause
	for _, c := range status.Status().Details.Causes {
		msg := strings.ToLower(c.Message)
		immutable := strings.Contains(msg, "immutable") || strings.Contains(msg, "may not change once set") ||
			c.Type == metav1.CauseType(field.ErrorTypeForbidden) && strings.Contains(msg, "updates to") && strings.Contains(msg, "are forbidden")
		if immutable && c.Field != "" {
			causes = append(causes, c)
		}
	}
	return causes
}

var (
	// otherThan is a StatefulSet's refusal up to Kubernetes 1.36 (pkg/apis/apps/validation):
	// "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template',
	// 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and
	// 'minReadySeconds' are forbidden"; earlier versions list fewer fields.
	otherThan = regexp.MustCompile(`for fields other than (.+?) are forbidden`)
	// exceptFor is a PersistentVolumeClaim's (pkg/apis/core/validation, v1.34 to v1.37): "spec is
	// immutable after creation except resources.requests and volumeAttributesClassName for bound
	// claims", then a diff.
	exceptFor = regexp.MustCompile(`immutable after creation except (.+?) for bound claims`)
	// listSeparator separates the fields of those lists: "a, b and c", "a and b".
	listSeparator = regexp.MustCompile(`\s*,\s*(?:and\s+)?|\s+and\s+`)
)

// updatableFields returns the fields, relative to the cause's field, that a refusal's message
// says may change ("replicas", "resources.requests"), and whether it lists any: only then does
// the cause name a parent of the fields it refuses.
func updatableFields(msg string) ([]string, bool) {
	m := otherThan.FindStringSubmatch(msg)
	if m == nil {
		m = exceptFor.FindStringSubmatch(msg)
	}
	if m == nil {
		return nil, false
	}
	var fields []string
	for _, f := range listSeparator.Split(m[1], -1) {
		if f = strings.Trim(f, "'\"` "); f != "" {
			fields = append(fields, f)
		}
	}
	return fields, len(fields) > 0
}

// ImmutableFieldError is an apply the API server refused because it changes fields that cannot
// change on an existing object (ImmutableFields). It is terminal: the owner is Stalled until its
// spec changes back, or until the node may re-create the object (a Recreate policy).
type ImmutableFieldError struct {
	// Object names the object: "Kind namespace/name".
	Object string
	// Fields are the refused fields (spec.volumeClaimTemplates): as the API server names them, or
	// the ones the update changes where it names only their parent (ChangedImmutableFields).
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
