package rbac

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func r(groups, resources, verbs string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: strings.Split(groups, ","), Resources: strings.Split(resources, ","), Verbs: strings.Split(verbs, ",")}
}

// TestMerge: one rule per group and resource, verbs deduplicated and sorted, rules sorted; rules
// naming objects or URLs are dropped.
func TestMerge(t *testing.T) {
	named := r("", "secrets", "get")
	named.ResourceNames = []string{"x"}
	got := Merge([]rbacv1.PolicyRule{r("apps", "deployments,statefulsets", "watch,get"), r("", "configmaps", "get"), named},
		[]rbacv1.PolicyRule{r("apps", "deployments", "get,delete")})
	want := []rbacv1.PolicyRule{r("", "configmaps", "get"), r("apps", "deployments", "delete,get,watch"), r("apps", "statefulsets", "get,watch")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
}

// TestMissing: what granted rules do not allow, verb by verb; wildcards allow, rules limited to
// resource names do not.
func TestMissing(t *testing.T) {
	need := Merge(Owner(schema.GroupResource{Group: "example.com", Resource: "hellos"}), Kdag())
	named := r("*", "*", "*")
	named.ResourceNames = []string{"x"}
	for _, tc := range []struct {
		name    string
		granted []rbacv1.PolicyRule
		want    []rbacv1.PolicyRule
	}{
		{"everything", need, nil},
		{"wildcards", []rbacv1.PolicyRule{r("*", "*", "*")}, nil},
		{"only resource names", []rbacv1.PolicyRule{named}, need},
		{"a verb and a subresource short", []rbacv1.PolicyRule{r("example.com", "hellos,hellos/status", "get,list,watch,update,patch"),
			r("events.k8s.io", "events", "create"), r("apps", "controllerrevisions", "*")},
			[]rbacv1.PolicyRule{r("events.k8s.io", "events", "patch"), r("example.com", "hellos/finalizers", "update")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Missing(tc.granted, need); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Missing = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMarkers: controller-gen's marker syntax, the core group quoted, a Role's namespace.
func TestMarkers(t *testing.T) {
	got := Markers("ops", []rbacv1.PolicyRule{r("", "configmaps", "get,list"), r("apps", "deployments", "delete")})
	want := []string{
		`+kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list,namespace=ops`,
		"+kubebuilder:rbac:groups=apps,resources=deployments,verbs=delete,namespace=ops",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Markers =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
