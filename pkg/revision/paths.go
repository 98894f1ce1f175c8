package revision

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// ChangedPaths returns the paths of the fields whose values differ between before and after, an
// object's content before and after a write, sorted: map keys joined by '.', a key that is not a
// plain name in brackets ("metadata.annotations[kdag.dev/dependencies-hash]"), list elements by
// index ("spec.containers[0].image") when the lists have the same length, else the list's path.
// Left out: status, what the API server sets on every write (metadata.managedFields,
// resourceVersion, generation, uid, creationTimestamp) and kdag's bookkeeping annotations that
// change with every write (kdag.dev/desired-hash, the trace context). Only paths are returned,
// never values, so a Secret's paths name its keys only.
func ChangedPaths(before, after map[string]any) []string {
	var out []string
	diffPaths("", before, after, &out)
	slices.Sort(out)
	return out
}

// ignoredPaths are left out of ChangedPaths.
var ignoredPaths = map[string]bool{
	"apiVersion":                 true, // a typed object from a cache has none
	"kind":                       true,
	"status":                     true,
	"metadata.managedFields":     true,
	"metadata.resourceVersion":   true,
	"metadata.generation":        true,
	"metadata.uid":               true,
	"metadata.creationTimestamp": true,
	annotationPath(kdagv1alpha1.AnnotationDesiredHash): true,
	annotationPath(tracing.AnnotationTraceParent):      true,
}

func annotationPath(key string) string { return join("metadata.annotations", key) }

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// join appends key to the path at.
func join(at, key string) string {
	if !plainKey.MatchString(key) {
		return at + "[" + key + "]"
	}
	if at == "" {
		return key
	}
	return at + "." + key
}

func diffPaths(at string, before, after any, out *[]string) {
	if ignoredPaths[at] {
		return
	}
	bm, bok := before.(map[string]any)
	am, aok := after.(map[string]any)
	if bok && aok {
		for k, bv := range bm {
			av, ok := am[k]
			if !ok {
				if !ignoredPaths[join(at, k)] {
					*out = append(*out, join(at, k))
				}
				continue
			}
			diffPaths(join(at, k), bv, av, out)
		}
		for k := range am {
			if _, ok := bm[k]; !ok && !ignoredPaths[join(at, k)] {
				*out = append(*out, join(at, k))
			}
		}
		return
	}
	bl, blok := before.([]any)
	al, alok := after.([]any)
	if blok && alok && len(bl) == len(al) {
		for i := range bl {
			diffPaths(at+"["+strconv.Itoa(i)+"]", bl[i], al[i], out)
		}
		return
	}
	if !equalValue(before, after) && at != "" {
		*out = append(*out, at)
	}
}

// equalValue compares two JSON values, numbers by value (a typed object's content holds int64
// where decoded JSON may hold float64).
func equalValue(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
