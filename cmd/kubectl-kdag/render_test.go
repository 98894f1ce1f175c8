package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// demoTree loads the demo Gitea from the fake cluster, expanded depth levels.
func demoTree(t *testing.T, depth int) *ownerTree {
	t.Helper()
	var warn bytes.Buffer
	r, _ := newTestReader(t, &warn, demoObjects(t)...)
	m, err := resolveType(r.mapper, "gitea")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.load(context.Background(), m, "default", "demo", depth)
	if err != nil {
		t.Fatal(err)
	}
	if warn.Len() > 0 {
		t.Errorf("warnings: %s", warn.String())
	}
	return tr
}

func rendered(t *testing.T, tr *ownerTree, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b, tr, format, testNow); err != nil {
		t.Fatalf("write %s: %v", format, err)
	}
	return b.String()
}

func checkOutput(t *testing.T, what, got, want string) {
	t.Helper()
	want = strings.TrimPrefix(want, "\n")
	if got != want {
		t.Errorf("%s:\n--- got\n%s--- want\n%s", what, got, want)
	}
}

func TestWriteTree_TwoLevels(t *testing.T) {
	checkOutput(t, "tree", rendered(t, demoTree(t, 3), "tree"), `
NAME                             READY  STATE            MESSAGE
Gitea/demo                       False  WaitingForNodes  waiting for PostgreSQL default/demo-postgresql
├─Secret/demo-admin              True   Ready
├─PostgreSQL/demo-postgresql     False  Waiting          waiting for StatefulSet default/demo-postgresql: Available: 0 of 1 replicas ready
│ ├─Secret/demo-postgresql-auth  True   Ready
│ ├─Service/demo-postgresql      True   Ready
│ └─StatefulSet/demo-postgresql  False  Waiting          Available: 0 of 1 replicas ready
├─Valkey/demo-valkey             True   Ready
│ ├─ConfigMap/demo-valkey        True   Ready
│ └─StatefulSet/demo-valkey      True   Ready
└─GiteaServer/demo               False  Blocked          waiting for PostgreSQL default/demo-postgresql
`)
}

func TestWriteTree_DepthZeroDoesNotExpand(t *testing.T) {
	checkOutput(t, "tree", rendered(t, demoTree(t, 0), "tree"), `
NAME                          READY  STATE            MESSAGE
Gitea/demo                    False  WaitingForNodes  waiting for PostgreSQL default/demo-postgresql
├─Secret/demo-admin           True   Ready
├─PostgreSQL/demo-postgresql  False  Waiting          waiting for StatefulSet default/demo-postgresql: Available: 0 of 1 replicas ready
├─Valkey/demo-valkey          True   Ready
└─GiteaServer/demo            False  Blocked          waiting for PostgreSQL default/demo-postgresql
`)
}

func TestWriteTree_LastNodeExpandedAndOtherNamespace(t *testing.T) {
	tr := &ownerTree{Kind: "App", Namespace: "a", Name: "x", Generation: 3, Status: kdagv1alpha1.Status{ObservedGeneration: 2,
		Graph: &kdagv1alpha1.GraphSummary{Total: 2, Ready: 2, Nodes: []kdagv1alpha1.GraphNode{
			{Kind: "ClusterRole", Name: "x", State: kdagv1alpha1.NodeReady},
			{Group: "example.com", Kind: "Db", Namespace: "b", Name: "x-db", State: kdagv1alpha1.NodeReady},
		}}},
		Children: map[int]*ownerTree{1: {Kind: "Db", Namespace: "b", Name: "x-db", Status: kdagv1alpha1.Status{
			Graph: &kdagv1alpha1.GraphSummary{Total: 1, Ready: 1, Nodes: []kdagv1alpha1.GraphNode{{Kind: "Secret", Namespace: "b", Name: "x-db", State: kdagv1alpha1.NodeReady}}},
		}}},
	}
	checkOutput(t, "tree", rendered(t, tr, "tree"), `
NAME                     READY    STATE  MESSAGE
App/x                    Unknown         not reconciled yet (status of generation 2, current is 3)
├─ClusterRole/x          True     Ready
└─Db/x-db (namespace b)  True     Ready
  └─Secret/x-db          True     Ready
`)
}

func TestWriteTree_TruncatedGraphShowsNotReadyAndCounts(t *testing.T) {
	tr := &ownerTree{Kind: "App", Namespace: "a", Name: "big", Status: kdagv1alpha1.Status{
		Graph: &kdagv1alpha1.GraphSummary{Total: 150, Ready: 148, Failed: 1, Waiting: 1, Truncated: true, NotReady: []kdagv1alpha1.NodeStatus{
			{Kind: "Job", Namespace: "a", Name: "migrate", State: kdagv1alpha1.NodeFailed, Message: "BackoffLimitExceeded"},
			{Kind: "Deployment", Namespace: "a", Name: "web", State: kdagv1alpha1.NodeWaiting, Message: "0 of 2 replicas"},
		}}}}
	checkOutput(t, "tree", rendered(t, tr, "tree"), `
NAME                  READY    STATE    MESSAGE
App/big               Unknown           not reconciled yet
├─Job/migrate         False    Failed   BackoffLimitExceeded
├─Deployment/web      False    Waiting  0 of 2 replicas
└─... 148 more nodes                    not listed in the status (at most 100 are); 150 nodes: 148 ready, 1 waiting, 1 failed
`)
	for _, format := range []string{"mermaid", "dot"} {
		err := write(&bytes.Buffer{}, tr, format, testNow)
		if err == nil || !strings.Contains(err.Error(), "150 nodes, more than the 100") || !strings.Contains(err.Error(), "-o tree") {
			t.Errorf("%s of a truncated graph: err = %v, want one pointing to -o tree", format, err)
		}
	}
}

func TestWriteMermaid(t *testing.T) {
	checkOutput(t, "mermaid", rendered(t, demoTree(t, 3), "mermaid"), `
---
title: "Gitea/demo"
---
flowchart TD
  n0["Secret/demo-admin<br/>Ready"]:::Ready
  n1["PostgreSQL/demo-postgresql<br/>Waiting"]:::Waiting
  n2["Valkey/demo-valkey<br/>Ready"]:::Ready
  n3["GiteaServer/demo<br/>Blocked"]:::Blocked
  n0 --> n3
  n1 --> n3
  n2 --> n3
  classDef Ready fill:#b7e1b0
  classDef Waiting fill:#b9d7f0
  classDef Failed fill:#f4a6a6
  classDef Blocked fill:#d9d9d9
  classDef Canceled fill:#f6e3a1
`)
}

func TestWriteDOT(t *testing.T) {
	checkOutput(t, "dot", rendered(t, demoTree(t, 3), "dot"), `
digraph {
  label="Gitea/demo";
  labelloc=t;
  node [shape=box];
  n0 [label="Secret/demo-admin\nReady", style=filled, fillcolor="#b7e1b0"];
  n1 [label="PostgreSQL/demo-postgresql\nWaiting", style=filled, fillcolor="#b9d7f0"];
  n2 [label="Valkey/demo-valkey\nReady", style=filled, fillcolor="#b7e1b0"];
  n3 [label="GiteaServer/demo\nBlocked", style=filled, fillcolor="#d9d9d9"];
  n0 -> n3;
  n1 -> n3;
  n2 -> n3;
}
`)
}

func TestWriteMermaidAndDOT_Escape(t *testing.T) {
	tr := &ownerTree{Kind: "App", Name: `a"b`, Status: kdagv1alpha1.Status{Graph: &kdagv1alpha1.GraphSummary{Total: 1, Nodes: []kdagv1alpha1.GraphNode{
		{Kind: "ConfigMap", Name: `x<&#>"y`, State: kdagv1alpha1.NodeFailed, Blockers: "7"}, // out of range: no edge
	}}}}
	checkOutput(t, "mermaid", rendered(t, tr, "mermaid"), `
---
title: "App/a\"b"
---
flowchart TD
  n0["ConfigMap/x#lt;#amp;#35;#gt;#quot;y<br/>Failed"]:::Failed
  classDef Ready fill:#b7e1b0
  classDef Waiting fill:#b9d7f0
  classDef Failed fill:#f4a6a6
  classDef Blocked fill:#d9d9d9
  classDef Canceled fill:#f6e3a1
`)
	checkOutput(t, "dot", rendered(t, tr, "dot"), `
digraph {
  label="App/a\"b";
  labelloc=t;
  node [shape=box];
  n0 [label="ConfigMap/x<&#>\"y\nFailed", style=filled, fillcolor="#f4a6a6"];
}
`)
}

// TestWriteMermaidAndDOT_InferredEdgesDashed: the edges the status lists as inferred (issue 15)
// are drawn dashed, the declared ones solid.
func TestWriteMermaidAndDOT_InferredEdgesDashed(t *testing.T) {
	tr := &ownerTree{Kind: "Valkey", Name: "demo", Namespace: "default", Status: kdagv1alpha1.Status{Graph: &kdagv1alpha1.GraphSummary{Total: 3, Nodes: []kdagv1alpha1.GraphNode{
		{Kind: "ConfigMap", Namespace: "default", Name: "demo-config", State: kdagv1alpha1.NodeReady},
		{Kind: "Secret", Namespace: "default", Name: "demo-key", State: kdagv1alpha1.NodeReady},
		{Group: "apps", Kind: "Deployment", Namespace: "default", Name: "demo", State: kdagv1alpha1.NodeWaiting, Blockers: "1,0", Inferred: "0"},
	}}}}
	checkOutput(t, "dot", rendered(t, tr, "dot"), `
digraph {
  label="Valkey/demo";
  labelloc=t;
  node [shape=box];
  n0 [label="ConfigMap/demo-config\nReady", style=filled, fillcolor="#b7e1b0"];
  n1 [label="Secret/demo-key\nReady", style=filled, fillcolor="#b7e1b0"];
  n2 [label="Deployment/demo\nWaiting", style=filled, fillcolor="#b9d7f0"];
  n1 -> n2;
  n0 -> n2 [style=dashed];
}
`)
	if got := rendered(t, tr, "mermaid"); !strings.Contains(got, "  n1 --> n2\n  n0 -.-> n2\n") {
		t.Errorf("mermaid: want n1 --> n2 solid and n0 -.-> n2 dashed:\n%s", got)
	}

	// A status an older kdag wrote, blockers as lists of integers, draws the same.
	dot := rendered(t, tr, "dot")
	older := tr.Status.Graph.Nodes[2]
	older.Blockers, older.Inferred, older.DeprecatedBlockers, older.DeprecatedInferred = "", "", []int32{1, 0}, []int32{0}
	tr.Status.Graph.Nodes[2] = older
	if got := rendered(t, tr, "dot"); got != dot {
		t.Errorf("dot of an older kdag's status:\n%s\nwant as the current one's:\n%s", got, dot)
	}
}

func TestWriteDOT_OldOperatorWithoutNodes(t *testing.T) {
	tr := &ownerTree{Kind: "Gitea", Name: "demo", Status: kdagv1alpha1.Status{Graph: &kdagv1alpha1.GraphSummary{Total: 3, Ready: 3}}}
	err := write(&bytes.Buffer{}, tr, "dot", testNow)
	if err == nil || !strings.Contains(err.Error(), "does not list them") {
		t.Errorf("err = %v, want one saying the status does not list the nodes", err)
	}
	checkOutput(t, "tree", rendered(t, tr, "tree"), `
NAME                READY    STATE  MESSAGE
Gitea/demo          Unknown         not reconciled yet
└─... 3 more nodes                  not listed in the status (at most 100 are); 3 nodes: 3 ready
`)
}

// TestWriteDOT_CorruptIndices: blocker indices that do not parse (a status written by hand) are an
// error naming the owner and the node, for dot and mermaid alike; the tree view, which draws no
// edge, still shows the owner.
func TestWriteDOT_CorruptIndices(t *testing.T) {
	for _, field := range []string{"blockerIndices", "inferredIndices"} {
		node := kdagv1alpha1.GraphNode{Kind: "Deployment", Namespace: "default", Name: "demo", State: kdagv1alpha1.NodeWaiting, Blockers: "0"}
		if field == "blockerIndices" {
			node.Blockers = "0-2147483647"
		} else {
			node.Inferred = "x"
		}
		tr := &ownerTree{Kind: "Valkey", Name: "demo", Namespace: "default", Status: kdagv1alpha1.Status{Graph: &kdagv1alpha1.GraphSummary{Total: 2, Nodes: []kdagv1alpha1.GraphNode{
			{Kind: "ConfigMap", Namespace: "default", Name: "demo-config", State: kdagv1alpha1.NodeReady}, node,
		}}}}
		for _, format := range []string{"dot", "mermaid"} {
			err := write(&bytes.Buffer{}, tr, format, testNow)
			if err == nil || !strings.Contains(err.Error(), "Valkey demo: status.graph.nodes[1] (Deployment/demo)") {
				t.Errorf("%s, -o %s: err = %v, want one naming the owner and node 1", field, format, err)
			}
		}
		if got := rendered(t, tr, "tree"); !strings.Contains(got, "Deployment/demo") {
			t.Errorf("%s, -o tree:\n%s\nwant the Deployment listed", field, got)
		}
	}
}
