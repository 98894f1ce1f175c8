//go:build fieldsv1string

package intern

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// sameFieldSet reports whether a and b hold their field set as one handle (apimachinery's own
// sharing under the fieldsv1string tag).
func sameFieldSet(a, b *metav1.FieldsV1) bool {
	x, y := a.GetRawString(), b.GetRawString()
	return x != "" && same(x, y)
}
