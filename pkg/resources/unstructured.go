package resources

import (
	"reflect"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrNoKind is returned (wrapped) when an object's GroupVersionKind is neither given nor set on the
// object, so its apiVersion and kind cannot be written.
var ErrNoKind = errors.New("no GroupVersionKind given and none set on the object")

// ToUnstructured converts obj to an *unstructured.Unstructured with apiVersion and kind set from
// gvk. A typed object is converted with runtime.DefaultUnstructuredConverter (its TypeMeta may be
// empty, as it is for objects from a controller-runtime cache); an *unstructured.Unstructured is
// deep-copied. obj is never modified. When gvk is the zero value the object's own
// GroupVersionKind is used.
//
// It returns an error when obj is nil, when no kind and version are known (wrapping ErrNoKind), or
// when the conversion fails.
func ToUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if isNil(obj) {
		return nil, errors.New("convert nil object to unstructured")
	}
	if gvk.Empty() {
		gvk = obj.GetObjectKind().GroupVersionKind()
	}
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, errors.Wrapf(ErrNoKind, "convert %s to unstructured", describe(gvk.Kind, obj))
	}
	var u *unstructured.Unstructured
	if in, ok := obj.(*unstructured.Unstructured); ok {
		u = in.DeepCopy()
	} else {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, errors.Wrapf(err, "convert %s to unstructured", describe(gvk.Kind, obj))
		}
		u = &unstructured.Unstructured{Object: m}
	}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// Desired converts obj like ToUnstructured and prepares the result for server-side apply, so that
// kdag's field manager claims only fields the object really sets:
//   - status and the metadata the API server sets (creationTimestamp, resourceVersion, uid,
//     managedFields, generation, selfLink, deletionTimestamp, deletionGracePeriodSeconds) are
//     removed;
//   - null values of struct fields are removed at any depth (a nil pointer, or a zero time such as
//     spec.template.metadata.creationTimestamp);
//   - for typed objects only, an empty map is removed when it stands for a zero-valued, non-pointer
//     struct field tagged omitempty (resources: {}, strategy: {}, an empty template metadata).
//     Empty maps that mean something are kept: a pointer to an empty struct (emptyDir: {}) and a
//     struct field without omitempty (NetworkPolicy podSelector: {}). Empty maps in an
//     *unstructured.Unstructured are kept, as the caller wrote them on purpose.
//
// Errors are those of ToUnstructured.
func Desired(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	u, err := ToUnstructured(obj, gvk)
	if err != nil {
		return nil, err
	}
	stripVolatile(u.Object)
	if _, ok := obj.(*unstructured.Unstructured); ok {
		pruneNulls(u.Object)
	} else {
		pruneTyped(reflect.ValueOf(obj), u.Object)
	}
	return u, nil
}

// stripVolatile removes status and the metadata the API server sets from the object's content.
// These are never desired content: they are removed before an apply and never feed DesiredHash.
func stripVolatile(obj map[string]any) {
	delete(obj, "status")
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	for _, f := range [...]string{
		"creationTimestamp", "resourceVersion", "uid", "managedFields", "generation",
		"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
	} {
		delete(md, f)
	}
}

// pruneNulls removes null values from every map in v, at any depth, including maps inside lists.
func pruneNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			pruneNulls(e)
		}
	case []any:
		for _, e := range v {
			pruneNulls(e)
		}
	}
}

// pruneTyped walks the typed value v and its unstructured form u side by side and removes from u
// the null struct fields and the empty maps of zero, omitempty, non-pointer struct fields. Where
// the two forms do not line up (types with their own JSON form: Time, Quantity, IntOrString,
// RawExtension) it leaves u alone.
func pruneTyped(v reflect.Value, u any) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		if m, ok := u.(map[string]any); ok {
			pruneStruct(v, m)
		}
	case reflect.Slice, reflect.Array:
		l, ok := u.([]any)
		if !ok || len(l) != v.Len() {
			return
		}
		for i := range l {
			pruneTyped(v.Index(i), l[i])
		}
	case reflect.Map:
		m, ok := u.(map[string]any)
		if !ok || v.Type().Key().Kind() != reflect.String {
			return
		}
		for k, e := range m {
			if ev := v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())); ev.IsValid() {
				pruneTyped(ev, e)
			}
		}
	}
}

// pruneStruct applies pruneTyped to the fields of struct v, whose unstructured form is m.
func pruneStruct(v reflect.Value, m map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if name == "" && (f.Anonymous || hasOption(opts, "inline")) {
			pruneTyped(v.Field(i), m) // inlined: its fields live in m itself
			continue
		}
		if name == "" {
			name = f.Name
		}
		val, ok := m[name]
		if !ok {
			continue
		}
		if val == nil {
			delete(m, name)
			continue
		}
		pruneTyped(v.Field(i), val)
		if f.Type.Kind() == reflect.Struct && hasOption(opts, "omitempty") && isEmptyMap(val) {
			delete(m, name)
		}
	}
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

func isEmptyMap(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// describe names an object in errors as "Kind namespace/name", or "Kind name" when it has no
// namespace. kind falls back to the object's own kind.
func describe(kind string, obj runtime.Object) string {
	if kind == "" && !isNil(obj) {
		kind = obj.GetObjectKind().GroupVersionKind().Kind
	}
	if kind == "" {
		kind = "object"
	}
	if isNil(obj) {
		return kind + " <nil>"
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return kind
	}
	if ns := acc.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + acc.GetName()
	}
	return kind + " " + acc.GetName()
}

// describeU is describe for an unstructured object.
func describeU(u *unstructured.Unstructured) string {
	if u == nil {
		return "object <nil>"
	}
	return describe(u.GetKind(), u)
}
