package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

func TestResolveType(t *testing.T) {
	mapper := newMapper(fakeDiscovery(), &bytes.Buffer{})
	for arg, want := range map[string]string{
		"gitea":                          "giteas",
		"giteas":                         "giteas",
		"gt":                             "giteas",
		"Gitea":                          "giteas",
		"giteas.gitea.kdag.dev":          "giteas",
		"giteas.v1alpha1.gitea.kdag.dev": "giteas",
		"Gitea.gitea.kdag.dev":           "giteas",
		"gtpg":                           "postgresqls",
		"valkey":                         "valkeys",
		"sts":                            "statefulsets",
	} {
		m, err := resolveType(mapper, arg)
		if err != nil {
			t.Errorf("%s: %v", arg, err)
			continue
		}
		if m.Resource.Resource != want {
			t.Errorf("%s: resource %s, want %s", arg, m.Resource, want)
		}
	}
	if _, err := resolveType(mapper, "nope"); err == nil || !strings.Contains(err.Error(), `does not have a resource type "nope"`) {
		t.Errorf("unknown type: err = %v", err)
	}
}

func TestLoad_ReadsOnlyCustomResources(t *testing.T) {
	var warn bytes.Buffer
	r, dyn := newTestReader(t, &warn, demoObjects(t)...)
	m, _ := resolveType(r.mapper, "gt")
	tr, err := r.load(context.Background(), m, "default", "demo", 3)
	if err != nil {
		t.Fatal(err)
	}
	var gets []string
	for _, a := range dyn.Actions() {
		gets = append(gets, a.GetVerb()+" "+a.GetResource().Resource)
	}
	// Secrets and StatefulSets are never read; the blocked GiteaServer does not exist.
	if got, want := strings.Join(gets, ", "), "get giteas, get postgresqls, get valkeys, get giteaservers"; got != want {
		t.Errorf("requests: %s\nwant      %s", got, want)
	}
	if len(tr.Children) != 2 || tr.Children[1].Name != "demo-postgresql" || tr.Children[2].Name != "demo-valkey" {
		t.Errorf("children %v, want PostgreSQL at 1 and Valkey at 2", tr.Children)
	}
	if warn.Len() > 0 {
		t.Errorf("warnings: %s", warn.String())
	}
}

func TestLoad_NotAKdagOwner(t *testing.T) {
	r, _ := newTestReader(t, &bytes.Buffer{}, demoObjects(t)...)
	m, _ := resolveType(r.mapper, "gitea")
	_, err := r.load(context.Background(), m, "default", "not-kdag", 3)
	want := "giteas.gitea.kdag.dev not-kdag in namespace default has no status.graph: it is not reconciled by a kdag controller, or has not been reconciled yet"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
	_, err = r.load(context.Background(), m, "default", "missing", 3)
	if err == nil || !strings.Contains(err.Error(), `get giteas.gitea.kdag.dev missing: giteas.gitea.kdag.dev "missing" not found`) {
		t.Errorf("missing owner: err = %v", err)
	}
}

func TestLoad_StalledOwnerWithoutGraph(t *testing.T) {
	// A graph that could not be built has no status.graph, but the owner is kdag's.
	stalled := owner(t, "Gitea", "bad", 1, kdagv1alpha1.Status{ObservedGeneration: 1, OperatorVersion: "dev",
		Conditions: ready(metav1.ConditionFalse, "Invalid", "Gitea default/bad is invalid: spec.adminEmail is required")})
	r, _ := newTestReader(t, &bytes.Buffer{}, stalled)
	m, _ := resolveType(r.mapper, "gitea")
	tr, err := r.load(context.Background(), m, "default", "bad", 3)
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, "tree", rendered(t, tr, "tree"), `
NAME       READY  STATE    MESSAGE
Gitea/bad  False  Invalid  Gitea default/bad is invalid: spec.adminEmail is required
`)
	checkOutput(t, "mermaid", rendered(t, tr, "mermaid"), `
---
title: "Gitea/bad"
---
flowchart TD
  classDef Ready fill:#b7e1b0
  classDef Waiting fill:#b9d7f0
  classDef Failed fill:#f4a6a6
  classDef Blocked fill:#d9d9d9
  classDef Canceled fill:#f6e3a1
`)
}

func TestLoad_UnknownNodeKindIsAWarningNotAnError(t *testing.T) {
	o := owner(t, "Gitea", "x", 1, kdagv1alpha1.Status{ObservedGeneration: 1, OperatorVersion: "dev",
		Conditions: ready(metav1.ConditionTrue, "Ready", "1 nodes ready"),
		Graph: &kdagv1alpha1.GraphSummary{Total: 1, Ready: 1, Nodes: []kdagv1alpha1.GraphNode{
			{Group: "example.com", Kind: "Thing", Namespace: "default", Name: "t", State: kdagv1alpha1.NodeReady},
		}}})
	var warn bytes.Buffer
	r, _ := newTestReader(t, &warn, o)
	m, _ := resolveType(r.mapper, "gitea")
	tr, err := r.load(context.Background(), m, "default", "x", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "Warning: Thing t:") {
		t.Errorf("warnings %q, want one about Thing t", warn.String())
	}
	checkOutput(t, "tree", rendered(t, tr, "tree"), `
NAME       READY  STATE  MESSAGE
Gitea/x    True   Ready  1 nodes ready
└─Thing/t  True   Ready
`)
}

func TestMaybeOwner(t *testing.T) {
	for group, want := range map[string]bool{
		"": false, "apps": false, "batch": false, "rbac.authorization.k8s.io": false, "k8s.io": false,
		"gitea.kdag.dev": true, "cert-manager.io": true, "postgresql.cnpg.io": true,
	} {
		if got := maybeOwner(group); got != want {
			t.Errorf("maybeOwner(%q) = %v, want %v", group, got, want)
		}
	}
}
