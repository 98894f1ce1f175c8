package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/operator"
	"github.com/kdag-dev/kdag/pkg/rbac"
)

// TestRBAC_RolesGrantWhatTheControllersNeed: the manager's roles (config/rbac: the ClusterRole
// that `make manifests` generates from the +kubebuilder:rbac markers, and the leader election
// Role), and the chart's copy of the ClusterRole, grant every rule operator.Rules derives from the
// components' owner types and OwnedTypes: a type added to OwnedTypes without its marker fails
// here, with the markers to add, rather than at the manager's start in a cluster.
func TestRBAC_RolesGrantWhatTheControllersNeed(t *testing.T) {
	env := api.Env(t) // the CRDs' resource names come from the API server
	need, err := operator.Rules(scheme, env.Client.RESTMapper(), controllers.Components(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, clusterRole := range []string{"config/rbac/role.yaml", "charts/kdag/files/role.yaml"} {
		t.Run(clusterRole, func(t *testing.T) {
			granted := append(rulesOf(t, clusterRole), rulesOf(t, "config/rbac/leader_election_role.yaml")...)
			if missing := rbac.Missing(granted, need); missing != nil {
				t.Errorf("%s lacks rules the controllers need; add these markers (controllers/<component>/resources.go) "+
					"and run make manifests:\n%s", clusterRole, strings.Join(rbac.Markers("", missing), "\n"))
			}
		})
	}
}

// rulesOf returns the rules of the Roles and ClusterRoles of a YAML file.
func rulesOf(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		var role rbacv1.ClusterRole // a Role's rules have the same shape
		if err := yaml.Unmarshal(doc, &role); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if role.Kind == "Role" || role.Kind == "ClusterRole" {
			rules = append(rules, role.Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatalf("%s holds no Role or ClusterRole rule", file)
	}
	return rules
}
