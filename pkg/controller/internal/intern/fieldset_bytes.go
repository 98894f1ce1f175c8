//go:build !fieldsv1string

package intern

import (
	"unique"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fieldSet replaces f's bytes by the canonical copy of them, as a slice of the canonical
// string's bytes (read only: see ObjectMeta). unique.Make copies a string it keeps, so f's own
// array is not kept.
func fieldSet(f *metav1.FieldsV1) {
	raw := f.GetRawBytes()
	if len(raw) == 0 {
		return
	}
	s := unique.Make(unsafe.String(unsafe.SliceData(raw), len(raw))).Value()
	// SetRawBytes copies; only the field itself can hold the shared array.
	f.Raw = unsafe.Slice(unsafe.StringData(s), len(s)) //nolint:staticcheck // SA1019: the one way to share the bytes (see ObjectMeta)
}
