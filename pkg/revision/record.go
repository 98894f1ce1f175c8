// Package revision is kdag's history of an owner: every reconcile that writes an owner's objects
// records a revision, an apps/v1 ControllerRevision owned by the owner, holding the owner's spec
// (for a rollback), its hash and generation, the operator version, the trace ID of the reconcile
// and per node what it did and which fields changed (paths only, never values). The Controller
// writes them (package controller); this package defines their format and reads them back
// (List, Decode) for `kubectl kdag history` and `kubectl kdag rollback` (Run).
package revision

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

const (
	// AnnotationHistoryLimit on an owner bounds how many revisions kdag keeps of it: a
	// non-negative integer; the oldest are deleted once a new one is recorded. 0 records none
	// (and deletes the ones there are on the next reconcile that writes). Absent or not a
	// non-negative integer: DefaultHistoryLimit.
	AnnotationHistoryLimit = "kdag.dev/revision-history-limit"
	// DefaultHistoryLimit is how many revisions kdag keeps of an owner without
	// AnnotationHistoryLimit, as a Deployment's revisionHistoryLimit does.
	DefaultHistoryLimit = 10
	// LabelRevisionKind on a revision is the owner's kind, lower case ("gitea"): with
	// kdagv1alpha1.LabelOwnerUID it selects an owner's revisions.
	LabelRevisionKind = "kdag.dev/revision-of"
	// MaxFields is how many changed field paths a revision keeps per node; more are counted in
	// NodeChange.MoreFields.
	MaxFields = 32
)

// Record is what one revision says, stored as the ControllerRevision's data (JSON).
type Record struct {
	// Revision is the ControllerRevision's revision number (Decode sets it; the data leaves it
	// out): 1 for the owner's first, one more for each later one.
	Revision int64 `json:"revision,omitempty"`
	// Time is when the reconcile recorded it.
	Time metav1.Time `json:"time"`
	// Owner names the owner: its apiVersion, kind, name and UID.
	Owner OwnerRef `json:"owner"`
	// Generation is the owner's metadata.generation the reconcile applied.
	Generation int64 `json:"generation"`
	// SpecHash is SpecHash(Spec): equal hashes, equal specs.
	SpecHash string `json:"specHash"`
	// OperatorVersion is the version of the operator that reconciled (controller.Options.OperatorVersion).
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// Controller is the kdag controller's name.
	Controller string `json:"controller,omitempty"`
	// TraceID is the reconcile's trace ID, "" when tracing is off.
	TraceID string `json:"traceID,omitempty"`
	// Spec is the owner's content as the API server held it: every top-level field but
	// apiVersion, kind, metadata and status (Spec of the owner). A rollback applies it.
	Spec map[string]any `json:"spec"`
	// Nodes are the objects the reconcile wrote, in graph order, then those it pruned.
	Nodes []NodeChange `json:"nodes"`
}

// OwnerRef names a revision's owner.
type OwnerRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
}

// NodeChange is what one reconcile did to one object of the owner.
type NodeChange struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Action is the apply engine's action: created, applied, adopted, recreating, pruned,
	// orphaned.
	Action string `json:"action"`
	// Fields are the paths of the fields the write changed ("spec.template.spec.containers[0].image"),
	// sorted, at most MaxFields; for a re-created object the immutable fields that forced it.
	// Never values.
	Fields []string `json:"fields,omitempty"`
	// MoreFields counts the changed fields left out of Fields.
	MoreFields int `json:"moreFields,omitempty"`
	// Drifted are the fields another writer had changed that the write reverted.
	Drifted []string `json:"drifted,omitempty"`
}

// Title is "Kind namespace/name" (or "Kind name").
func (n NodeChange) Title() string {
	if n.Namespace == "" {
		return n.Kind + " " + n.Name
	}
	return n.Kind + " " + n.Namespace + "/" + n.Name
}

// Spec returns owner's content for a revision: a copy of every top-level field but apiVersion,
// kind, metadata and status. It returns an error naming the owner when it cannot be converted.
func Spec(owner client.Object) (map[string]any, error) {
	var content map[string]any
	if u, ok := owner.(*unstructured.Unstructured); ok {
		content = u.Object
	} else {
		var err error
		if content, err = runtime.DefaultUnstructuredConverter.ToUnstructured(owner); err != nil {
			return nil, errors.Wrapf(err, "convert %s/%s", owner.GetNamespace(), owner.GetName())
		}
	}
	spec := map[string]any{}
	for k, v := range content {
		if !isMetaField(k) {
			spec[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	return spec, nil
}

// isMetaField reports whether a top-level field is not part of an owner's spec.
func isMetaField(k string) bool {
	return k == "apiVersion" || k == "kind" || k == "metadata" || k == "status"
}

// SpecHash returns the hex SHA-256 of spec's JSON (map keys sorted), its first 16 characters.
func SpecHash(spec map[string]any) string {
	raw, err := json.Marshal(spec)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// WithSpec returns a copy of owner, unstructured, whose top-level fields but apiVersion, kind,
// metadata and status are spec's: the owner as a rollback to spec writes it.
func WithSpec(owner *unstructured.Unstructured, spec map[string]any) *unstructured.Unstructured {
	out := owner.DeepCopy()
	for k := range out.Object {
		if !isMetaField(k) {
			delete(out.Object, k)
		}
	}
	for k, v := range spec {
		if !isMetaField(k) {
			out.Object[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	return out
}

// Name returns the name of revision n of the owner of kind and name: "<kind>-<name>-<n>", kind
// in lower case (a kind has no '-', so the name is unique per owner and number in a namespace);
// a name that would be longer than 253 characters is shortened and made unique by a hash of the
// owner's name.
func Name(kind, name string, n int64) string {
	suffix := "-" + strconv.FormatInt(n, 10)
	out := strings.ToLower(kind) + "-" + name
	if len(out)+len(suffix) > 253 {
		sum := sha256.Sum256([]byte(name))
		out = out[:253-len(suffix)-9] + "-" + hex.EncodeToString(sum[:4])
	}
	return out + suffix
}

// Labels returns the labels of a revision of owner (of kind) that controller records: kdag's
// controller and owner UID labels, LabelRevisionKind and the managed-by label. Never the owner's
// shard label: an owner that moves to another shard keeps one history, which every replica's
// cache holds (without the data), so that the next number and the pruning see all of it.
func Labels(owner client.Object, kind, controller string) map[string]string {
	return map[string]string{
		kdagv1alpha1.LabelManagedBy:  "kdag",
		kdagv1alpha1.LabelController: controller,
		kdagv1alpha1.LabelOwnerUID:   string(owner.GetUID()),
		LabelRevisionKind:            strings.ToLower(kind),
	}
}

// Encode returns the ControllerRevision data of rec, in canonical JSON: compact, with the keys of
// every object sorted. A ControllerRevision's data is immutable, and the API server checks that
// byte for byte on every update: a patch of the metadata alone (the garbage collector orphaning
// the revision of an owner deleted with --cascade=orphan, a shard relabel) re-encodes the data
// with sorted keys, so data in another key order would make every such patch fail as a change
// of data, and the owner would stay on its "orphan" finalizer for good.
func Encode(rec *Record) (runtime.RawExtension, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return runtime.RawExtension{}, errors.Wrap(err, "encode revision")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their text
	var v any
	if err := dec.Decode(&v); err != nil {
		return runtime.RawExtension{}, errors.Wrap(err, "encode revision")
	}
	if raw, err = json.Marshal(v); err != nil { // maps: keys sorted
		return runtime.RawExtension{}, errors.Wrap(err, "encode revision")
	}
	return runtime.RawExtension{Raw: raw}, nil
}

// Decode returns the Record of a ControllerRevision kdag recorded, its Revision set. It returns an
// error naming the ControllerRevision when its data is not a Record.
func Decode(cr *appsv1.ControllerRevision) (*Record, error) {
	raw := cr.Data.Raw
	if raw == nil && cr.Data.Object != nil {
		var err error
		if raw, err = json.Marshal(cr.Data.Object); err != nil {
			return nil, errors.Wrapf(err, "ControllerRevision %s/%s", cr.Namespace, cr.Name)
		}
	}
	rec := &Record{}
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, errors.Wrapf(err, "ControllerRevision %s/%s is not a kdag revision", cr.Namespace, cr.Name)
	}
	rec.Revision = cr.Revision
	return rec, nil
}

// HistoryLimit returns how many revisions to keep of owner (AnnotationHistoryLimit), and false
// when the annotation is set to something else than a non-negative integer (the limit is then
// DefaultHistoryLimit).
func HistoryLimit(owner metav1.Object) (int, bool) {
	v, ok := owner.GetAnnotations()[AnnotationHistoryLimit]
	if !ok {
		return DefaultHistoryLimit, true
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return DefaultHistoryLimit, false
	}
	return n, true
}
