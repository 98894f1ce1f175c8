package plan

import (
	"reflect"

	"github.com/pkg/errors"
	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/pkg/internal/graphplan"
)

// Placeholders of Secret values in the live plan's diffs: every value is replaced, as the
// offline plan's yaml output does (graphplan.RedactSecretValues); one the write changes gets a
// placeholder per side, so that the diff still shows that it changes (kubectl diff's habit).
const (
	redacted         = "<redacted>"
	redactedOldValue = "<redacted; old value>"
	redactedNewValue = "<redacted; new value>"
)

// yamlDiff returns the unified diff of before and after as YAML, in the manner of kubectl diff:
// "--- live" and "+++ planned", three lines of context, without the fields the API server sets
// (managedFields, resourceVersion, generation, uid, creationTimestamp) and status, Secret values
// redacted. "" when they are equal.
func yamlDiff(before, after *unstructured.Unstructured) (string, error) {
	b, a := comparable(before), comparable(after)
	gvk := before.GroupVersionKind()
	placeholder := func(changed string) func(field, key string) string {
		return func(field, key string) string {
			bv, _, _ := unstructured.NestedFieldNoCopy(before.Object, field, key)
			av, _, _ := unstructured.NestedFieldNoCopy(after.Object, field, key)
			if bv != nil && av != nil && !reflect.DeepEqual(bv, av) {
				return changed
			}
			return redacted
		}
	}
	graphplan.RedactSecretValues(gvk, b, placeholder(redactedOldValue))
	graphplan.RedactSecretValues(gvk, a, placeholder(redactedNewValue))
	by, err := yaml.Marshal(b)
	if err != nil {
		return "", errors.WithStack(err)
	}
	ay, err := yaml.Marshal(a)
	if err != nil {
		return "", errors.WithStack(err)
	}
	if string(by) == string(ay) {
		return "", nil
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(by)), B: difflib.SplitLines(string(ay)),
		FromFile: "live", ToFile: "planned", Context: 3,
	})
	return d, errors.WithStack(err)
}

// comparable returns a copy of u's content without what the API server sets on every write and
// without status.
func comparable(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	return c.Object
}
