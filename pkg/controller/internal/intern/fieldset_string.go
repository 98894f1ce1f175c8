//go:build fieldsv1string

package intern

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// fieldSet leaves f as it is: built with the fieldsv1string tag, apimachinery holds every field
// set as a unique.Handle already, one copy per distinct value.
func fieldSet(*metav1.FieldsV1) {}
