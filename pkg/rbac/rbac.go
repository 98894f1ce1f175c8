// Package rbac says which RBAC rules a kdag operator's manager needs, in one place: the rules
// of an owner type (Owner), of a type its graphs apply (Owned), kdag's own (Kdag: events and
// the owners' revisions) and those of leader election and shards (Leases). Package controller
// checks them at start-up and names the missing ones as rules to add (Markers); package operator
// lists them all for an operator (operator.Rules), so that a test or a generator can compare
// them with the manager's ClusterRole (Missing).
package rbac

import (
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The verbs of each kind of rule.
var (
	// OwnerVerbs are kdag's verbs on an owner type: read from the cache (get, list, watch), the
	// finalizer and the shard label written (update, patch).
	OwnerVerbs = []string{"get", "list", "watch", "update", "patch"}
	// OwnedVerbs are kdag's verbs on a type its graphs apply: cached (get, list, watch), applied
	// (create, patch; update for a Recreate's replacement) and pruned (delete).
	OwnedVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

// Owner returns the rules a Controller needs on its owner type, owner being the owner's group
// and plural resource name ("giteas" of group "gitea.kdag.dev"): OwnerVerbs on owner, update and
// patch on owner/status, update on owner/finalizers.
func Owner(owner schema.GroupResource) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(owner.Group, owner.Resource, OwnerVerbs...),
		rule(owner.Group, owner.Resource+"/status", "update", "patch"),
		rule(owner.Group, owner.Resource+"/finalizers", "update"),
	}
}

// Owned returns the rules a Controller needs on a type its ResourceManager's OwnedTypes lists,
// owned being its group and plural resource name: OwnedVerbs.
func Owned(owned schema.GroupResource) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{rule(owned.Group, owned.Resource, OwnedVerbs...)}
}

// Kdag returns the rules every kdag Controller needs whatever it owns: create and patch on
// events.k8s.io events (its Warning and Normal events), and get, list, watch, create and delete
// on apps controllerrevisions (the owners' revisions it records and prunes).
func Kdag() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule("events.k8s.io", "events", "create", "patch"),
		rule("apps", "controllerrevisions", "get", "list", "watch", "create", "delete"),
	}
}

// StorageClasses returns the rule of a Controller that owns PersistentVolumeClaims: get, list
// and watch on storage.k8s.io storageclasses (a claim that cannot grow is rechecked when its
// StorageClass changes).
func StorageClasses() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{rule("storage.k8s.io", "storageclasses", "get", "list", "watch")}
}

// Leases returns the rules of leader election (--leader-elect) and of shards (--shard,
// --shards=auto): every verb on coordination.k8s.io leases, in the namespace of the Leases
// (a Role there is enough).
func Leases() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{rule("coordination.k8s.io", "leases", "get", "list", "watch", "create", "update", "patch", "delete")}
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

// Merge returns rules with one rule per API group and resource, verbs deduplicated and sorted,
// the rules sorted by group then resource: the canonical form Missing and Markers print.
// Non-resource rules and resource names are not supported and are dropped.
func Merge(rules ...[]rbacv1.PolicyRule) []rbacv1.PolicyRule {
	verbs := map[schema.GroupResource]map[string]bool{}
	for _, list := range rules {
		for _, r := range list {
			if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
				continue
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					gr := schema.GroupResource{Group: g, Resource: res}
					if verbs[gr] == nil {
						verbs[gr] = map[string]bool{}
					}
					for _, v := range r.Verbs {
						verbs[gr][v] = true
					}
				}
			}
		}
	}
	out := make([]rbacv1.PolicyRule, 0, len(verbs))
	for gr, vs := range verbs {
		r := rule(gr.Group, gr.Resource)
		for v := range vs {
			r.Verbs = append(r.Verbs, v)
		}
		sort.Strings(r.Verbs)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].APIGroups[0] != out[j].APIGroups[0] {
			return out[i].APIGroups[0] < out[j].APIGroups[0]
		}
		return out[i].Resources[0] < out[j].Resources[0]
	})
	return out
}

// Missing returns the part of needed that granted does not allow, merged (Merge); nil when
// granted allows it all. A granted rule allows a verb on a group and resource when it lists them
// or "*"; a rule limited to resource names allows nothing here.
func Missing(granted, needed []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var missing []rbacv1.PolicyRule
	for _, r := range Merge(needed) {
		g, res := r.APIGroups[0], r.Resources[0]
		for _, v := range r.Verbs {
			if !allows(granted, g, res, v) {
				missing = append(missing, rule(g, res, v))
			}
		}
	}
	if missing == nil {
		return nil
	}
	return Merge(missing)
}

func allows(granted []rbacv1.PolicyRule, group, resource, verb string) bool {
	has := func(list []string, s string) bool {
		for _, x := range list {
			if x == s || x == rbacv1.APIGroupAll {
				return true
			}
		}
		return false
	}
	for _, r := range granted {
		if len(r.ResourceNames) == 0 && has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// Markers returns rules as controller-gen's +kubebuilder:rbac markers, one line each, in the
// order of rules; namespace, when not "", makes them a Role's rules in that namespace.
func Markers(namespace string, rules []rbacv1.PolicyRule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		groups := make([]string, len(r.APIGroups))
		for i, g := range r.APIGroups {
			groups[i] = g
			if g == "" {
				groups[i] = `""`
			}
		}
		line := fmt.Sprintf("+kubebuilder:rbac:groups=%s,resources=%s,verbs=%s",
			strings.Join(groups, ";"), strings.Join(r.Resources, ";"), strings.Join(r.Verbs, ";"))
		if namespace != "" {
			line += ",namespace=" + namespace
		}
		out = append(out, line)
	}
	return out
}
