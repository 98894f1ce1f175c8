//go:build !fieldsv1string

package intern

import (
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sameFieldSet reports whether a and b hold their field set in one array.
func sameFieldSet(a, b *metav1.FieldsV1) bool {
	x, y := a.GetRawBytes(), b.GetRawBytes()
	return len(x) > 0 && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
}
