package plan

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// changedFields returns the paths of the fields that differ between before and after (the
// comparable content of an object, live and as a dry run returned it), sorted: "spec.replicas",
// "spec.template.spec.containers[name=web].image" (list items that all have a name are named,
// others numbered: "args[2]"), "metadata.annotations[kdag.dev/desired-hash]" (a key that holds a
// dot or a slash is bracketed). A field added or removed is reported at its own path, a list
// whose length or names change at the list's.
func changedFields(before, after map[string]any) []string {
	var out []string
	walkChanged("", before, after, &out)
	slices.Sort(out)
	return slices.Compact(out)
}

// walkChanged appends to out the paths below path where b and a differ.
func walkChanged(path string, b, a any, out *[]string) {
	if reflect.DeepEqual(b, a) {
		return
	}
	switch bv := b.(type) {
	case map[string]any:
		av, ok := a.(map[string]any)
		if !ok {
			break
		}
		for k := range bv {
			walkChanged(fieldPath(path, k), bv[k], av[k], out)
		}
		for k := range av {
			if _, seen := bv[k]; !seen {
				*out = append(*out, fieldPath(path, k))
			}
		}
		return
	case []any:
		av, ok := a.([]any)
		if !ok {
			break
		}
		bn, an := itemNames(bv), itemNames(av)
		if bn != nil && an != nil && slices.Equal(bn, an) {
			for i := range bv {
				walkChanged(fmt.Sprintf("%s[name=%s]", path, bn[i]), bv[i], av[i], out)
			}
			return
		}
		if bn == nil && an == nil && len(bv) == len(av) {
			for i := range bv {
				walkChanged(fmt.Sprintf("%s[%d]", path, i), bv[i], av[i], out)
			}
			return
		}
	}
	*out = append(*out, path)
}

// fieldPath is path's field k: "path.k", or "path[k]" when k holds a dot or a slash.
func fieldPath(path, k string) string {
	switch {
	case strings.ContainsAny(k, "./"):
		return path + "[" + k + "]"
	case path == "":
		return k
	}
	return path + "." + k
}

// itemNames returns the "name" of every item of list when each is a map with a string name, else
// nil.
func itemNames(list []any) []string {
	names := make([]string, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		name, ok := m["name"].(string)
		if !ok {
			return nil
		}
		names = append(names, name)
	}
	return names
}
