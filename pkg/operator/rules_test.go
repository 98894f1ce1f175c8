package operator

import (
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/rbac"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// claims is pages with PersistentVolumeClaims too.
type claims struct{ pages }

func (claims) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}}
}

// staticMapper knows the resources of the tests' types, as a cluster with testapi's CRDs would.
func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.AddSpecific(testapi.GroupVersion.WithKind("Widget"), testapi.GroupVersion.WithResource("widgets"),
		testapi.GroupVersion.WithResource("widget"), meta.RESTScopeNamespace)
	for kind, resource := range map[string]string{"ConfigMap": "configmaps", "PersistentVolumeClaim": "persistentvolumeclaims"} {
		m.AddSpecific(corev1.SchemeGroupVersion.WithKind(kind), corev1.SchemeGroupVersion.WithResource(resource),
			corev1.SchemeGroupVersion.WithResource(strings.ToLower(kind)), meta.RESTScopeNamespace)
	}
	return m
}

// TestRules: an operator's rules come from its components' owner types and OwnedTypes alone,
// with kdag's own (events, revisions, Leases; StorageClasses with claims), one rule per group
// and resource.
func TestRules(t *testing.T) {
	all := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	rule := func(group, resource string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
	}
	got, err := Rules(newScheme(t), staticMapper(), controller.For("a", pages{}), controller.For("b", claims{}))
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		rule("", "configmaps", all...),
		rule("", "persistentvolumeclaims", all...),
		rule("apps", "controllerrevisions", "create", "delete", "get", "list", "watch"),
		rule("coordination.k8s.io", "leases", all...),
		rule("events.k8s.io", "events", "create", "patch"),
		rule("storage.k8s.io", "storageclasses", "get", "list", "watch"),
		rule("testing.kdag.dev", "widgets", "get", "list", "patch", "update", "watch"),
		rule("testing.kdag.dev", "widgets/finalizers", "update"),
		rule("testing.kdag.dev", "widgets/status", "patch", "update"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Rules:\n got %s\nwant %s", strings.Join(rbac.Markers("", got), "\n     "), strings.Join(rbac.Markers("", want), "\n     "))
	}
	if missing := rbac.Missing(want, got); missing != nil {
		t.Errorf("Missing(want, got) = %v, want nil", missing)
	}
	if missing := rbac.Missing(want[1:], got); !reflect.DeepEqual(missing, want[:1]) {
		t.Errorf("Missing without the ConfigMaps' rule = %v, want that rule", missing)
	}
	if _, err := Rules(newScheme(t), meta.NewDefaultRESTMapper(nil), controller.For("a", pages{})); err == nil ||
		!strings.Contains(err.Error(), "component a") || !strings.Contains(err.Error(), "is its CRD installed?") {
		t.Errorf("Rules with a mapper that knows no Widget: error %v, want one naming the component and the CRD", err)
	}
}

// TestKdagRules_Documented: the markers KdagRules' documentation lists are its rules.
func TestKdagRules_Documented(t *testing.T) {
	src, err := os.ReadFile("rules.go")
	if err != nil {
		t.Fatal(err)
	}
	markers := rbac.Markers("", KdagRules(schema.GroupResource{Group: "example.com", Resource: "hellos"}))
	if len(markers) != 6 {
		t.Errorf("KdagRules gave %d rules, the documentation lists 6:\n%s", len(markers), strings.Join(markers, "\n"))
	}
	for _, m := range markers {
		if !strings.Contains(string(src), "//\t"+m+"\n") {
			t.Errorf("KdagRules' documentation lacks %s", m)
		}
	}
}
