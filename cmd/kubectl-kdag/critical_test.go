package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// upgradingTree loads the Gitea name of upgradingObjects from the fake cluster, expanded depth
// levels.
func upgradingTree(t *testing.T, name string, depth int) *ownerTree {
	t.Helper()
	var warn bytes.Buffer
	r, _ := newTestReader(t, &warn, upgradingObjects(t)...)
	m, err := resolveType(r.mapper, "gitea")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.load(context.Background(), m, "default", name, depth)
	if err != nil {
		t.Fatal(err)
	}
	if warn.Len() > 0 {
		t.Errorf("warnings: %s", warn.String())
	}
	return tr
}

// TestWriteTree_CriticalPathAndWaitingFor (issue 15 item 3): the owner's row says what it has
// been waiting for since waitingFor.since and the last reconcile's duration and trace; each
// owner's critical path nodes, nested ones included, carry the marker and their times; the
// legend explains the marker.
func TestWriteTree_CriticalPathAndWaitingFor(t *testing.T) {
	checkOutput(t, "tree", rendered(t, upgradingTree(t, "demo", 3), "tree"), `
NAME                               READY  STATE            MESSAGE
Gitea/demo                         False  WaitingForNodes  waiting for GiteaServer default/demo for 2m5s; last reconcile 1.52s, trace 4bf92f3577b34da6a3ce929d0e0e4736
├─Secret/demo-admin                True   Ready
├─PostgreSQL/demo-postgresql *     True   Ready            run 1.2s
│ ├─Secret/demo-postgresql-auth *  True   Ready            run 40ms
│ └─StatefulSet/demo-postgresql *  True   Ready            run 2.05s, waited 1ms
├─Valkey/demo-valkey               True   Ready
└─GiteaServer/demo *               False  Waiting          run 310ms, waited 3ms; migrating to 1.27.4
* on the critical path of its owner's last reconcile (the chain of nodes that set its duration): run = apply and readiness check, waited = for a free worker
`)
}

// TestWriteTree_OwnerMessage pins the owner's row for the combinations of waitingFor,
// lastReconcile and the Ready condition.
func TestWriteTree_OwnerMessage(t *testing.T) {
	waiting := func(kind, ns, name string, state kdagv1alpha1.NodeState, ago time.Duration) *kdagv1alpha1.WaitingFor {
		return &kdagv1alpha1.WaitingFor{Kind: kind, Namespace: ns, Name: name, State: state, Since: metav1.NewTime(testNow.Add(-ago))}
	}
	last := &kdagv1alpha1.ReconcileSummary{TraceID: testTraceID, DurationMillis: 65432}
	for _, tc := range []struct {
		name       string
		generation int64
		st         kdagv1alpha1.Status
		want       string
	}{
		{"no new fields: the condition alone", 1, kdagv1alpha1.Status{ObservedGeneration: 1,
			Conditions: ready(metav1.ConditionFalse, kdagv1alpha1.ReasonWaiting, "waiting for Deployment a/web")},
			"waiting for Deployment a/web"},
		{"waiting: the node and for how long replace the list of waiting nodes", 1, kdagv1alpha1.Status{ObservedGeneration: 1,
			Conditions: ready(metav1.ConditionFalse, kdagv1alpha1.ReasonWaiting, "waiting for Deployment a/web (0 of 2), Job a/seed"),
			WaitingFor: waiting("Deployment", "a", "web", kdagv1alpha1.NodeWaiting, 3*time.Hour+2*time.Second+400*time.Millisecond), LastReconcile: last},
			"waiting for Deployment a/web for 3h0m2s; last reconcile 1m5.432s, trace " + testTraceID},
		{"a failed node: its state and the condition's error are kept", 1, kdagv1alpha1.Status{ObservedGeneration: 1,
			Conditions:    ready(metav1.ConditionFalse, "ApplyFailed", "Job a/migrate: forbidden"),
			WaitingFor:    waiting("Job", "a", "migrate", kdagv1alpha1.NodeFailed, 10*time.Second),
			LastReconcile: &kdagv1alpha1.ReconcileSummary{DurationMillis: 40}},
			"waiting for Job a/migrate (Failed) for 10s; Job a/migrate: forbidden; last reconcile 40ms"},
		{"a cluster-scoped node, a since in the future (clock skew): 0s", 1, kdagv1alpha1.Status{ObservedGeneration: 1,
			Conditions: ready(metav1.ConditionFalse, kdagv1alpha1.ReasonWaiting, "waiting for ClusterRole x"),
			WaitingFor: waiting("ClusterRole", "", "x", kdagv1alpha1.NodeWaiting, -time.Minute)},
			"waiting for ClusterRole x for 0s"},
		{"Ready: the last reconcile only", 1, kdagv1alpha1.Status{ObservedGeneration: 1,
			Conditions: ready(metav1.ConditionTrue, kdagv1alpha1.ReasonReady, "3 nodes ready"), LastReconcile: last},
			"3 nodes ready; last reconcile 1m5.432s, trace " + testTraceID},
		{"an old status: the generation note stays last", 2, kdagv1alpha1.Status{ObservedGeneration: 1,
			Conditions: ready(metav1.ConditionFalse, kdagv1alpha1.ReasonWaiting, "waiting for Deployment a/web"),
			WaitingFor: waiting("Deployment", "a", "web", kdagv1alpha1.NodeWaiting, time.Minute)},
			"waiting for Deployment a/web for 1m0s (status of generation 1, current is 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := treeRows(&ownerTree{Kind: "App", Namespace: "a", Name: "x", Generation: tc.generation, Status: tc.st}, testNow)
			if got := rows[0].message; got != tc.want {
				t.Errorf("owner message\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestWriteTree_NotListedNodesOnThePath: a graph too large to list shows its not-ready nodes,
// marked when on the critical path (matched without the group NotReady entries lack).
func TestWriteTree_NotListedNodesOnThePath(t *testing.T) {
	tr := &ownerTree{Kind: "App", Namespace: "a", Name: "big", Status: kdagv1alpha1.Status{
		Conditions: ready(metav1.ConditionFalse, "ApplyFailed", "Job a/migrate: BackoffLimitExceeded"),
		Graph: &kdagv1alpha1.GraphSummary{Total: 150, Ready: 148, Failed: 1, Waiting: 1, Truncated: true, NotReady: []kdagv1alpha1.NodeStatus{
			{Kind: "Job", Namespace: "a", Name: "migrate", State: kdagv1alpha1.NodeFailed, Message: "BackoffLimitExceeded"},
			{Kind: "Deployment", Namespace: "a", Name: "web", State: kdagv1alpha1.NodeWaiting, Message: "0 of 2 replicas"},
		}},
		LastReconcile: &kdagv1alpha1.ReconcileSummary{DurationMillis: 700, CriticalPath: []kdagv1alpha1.PathNode{
			{Group: "batch", Kind: "Job", Namespace: "a", Name: "migrate", State: kdagv1alpha1.NodeFailed, RunMillis: 700},
		}},
	}}
	checkOutput(t, "tree", rendered(t, tr, "tree"), `
NAME                  READY  STATE        MESSAGE
App/big               False  ApplyFailed  Job a/migrate: BackoffLimitExceeded; last reconcile 700ms
├─Job/migrate *       False  Failed       run 700ms; BackoffLimitExceeded
├─Deployment/web      False  Waiting      0 of 2 replicas
└─... 148 more nodes                      not listed in the status (at most 100 are); 150 nodes: 148 ready, 1 waiting, 1 failed
* on the critical path of its owner's last reconcile (the chain of nodes that set its duration): run = apply and readiness check, waited = for a free worker
`)
}

// TestWriteTree_NoCriticalPathNoLegend: a last reconcile without a critical path (no node ran)
// marks nothing and prints no legend; a path node of another group is not this node.
func TestWriteTree_NoCriticalPathNoLegend(t *testing.T) {
	tr := &ownerTree{Kind: "App", Namespace: "a", Name: "x", Status: kdagv1alpha1.Status{
		Conditions: ready(metav1.ConditionTrue, kdagv1alpha1.ReasonReady, "1 nodes ready"),
		Graph: &kdagv1alpha1.GraphSummary{Total: 1, Ready: 1, Nodes: []kdagv1alpha1.GraphNode{
			{Group: "example.com", Kind: "Db", Namespace: "a", Name: "db", State: kdagv1alpha1.NodeReady},
		}},
		LastReconcile: &kdagv1alpha1.ReconcileSummary{TraceID: testTraceID, CriticalPath: []kdagv1alpha1.PathNode{
			{Group: "other.example.com", Kind: "Db", Namespace: "a", Name: "db", RunMillis: 5},
		}},
	}}
	checkOutput(t, "tree", rendered(t, tr, "tree"), `
NAME     READY  STATE  MESSAGE
App/x    True   Ready  1 nodes ready; last reconcile 0s, trace 4bf92f3577b34da6a3ce929d0e0e4736
└─Db/db  True   Ready
`)
}

// TestWriteMermaidAndDOT_CriticalPathBold: the critical path's nodes and the edge between them
// are bold; the other edges into the same node are not.
func TestWriteMermaidAndDOT_CriticalPathBold(t *testing.T) {
	tr := upgradingTree(t, "demo", 0)
	checkOutput(t, "mermaid", rendered(t, tr, "mermaid"), `
---
title: "Gitea/demo"
---
flowchart TD
  n0["Secret/demo-admin<br/>Ready"]:::Ready
  n1["PostgreSQL/demo-postgresql<br/>Ready"]:::Ready
  n2["Valkey/demo-valkey<br/>Ready"]:::Ready
  n3["GiteaServer/demo<br/>Waiting"]:::Waiting
  n0 --> n3
  n1 --> n3
  n2 --> n3
  classDef Ready fill:#b7e1b0
  classDef Waiting fill:#b9d7f0
  classDef Failed fill:#f4a6a6
  classDef Blocked fill:#d9d9d9
  classDef Canceled fill:#f6e3a1
  classDef bold stroke:#000,stroke-width:3px
  class n1,n3 bold
  linkStyle 1 stroke-width:3px
`)
	checkOutput(t, "dot", rendered(t, tr, "dot"), `
digraph {
  label="Gitea/demo";
  labelloc=t;
  node [shape=box];
  n0 [label="Secret/demo-admin\nReady", style=filled, fillcolor="#b7e1b0"];
  n1 [label="PostgreSQL/demo-postgresql\nReady", style=filled, fillcolor="#b7e1b0", penwidth=3];
  n2 [label="Valkey/demo-valkey\nReady", style=filled, fillcolor="#b7e1b0"];
  n3 [label="GiteaServer/demo\nWaiting", style=filled, fillcolor="#b9d7f0", penwidth=3];
  n0 -> n3;
  n1 -> n3 [penwidth=3];
  n2 -> n3;
}
`)
}

// TestWriteTrace: the URL of the last reconcile's trace, or its ID; an owner without one gets an
// error that says why and what to do.
func TestWriteTrace(t *testing.T) {
	for _, tc := range []struct {
		owner, format, want, wantErr string
	}{
		{"demo", "url", "http://127.0.0.1:16686/trace/" + testTraceID + "\n", ""},
		{"demo", "id", testTraceID + "\n", ""},
		{"untraced", "url", "", "Gitea default/untraced: its last reconcile has no trace ID, so tracing may be off in its operator; " +
			"enable it by setting OTEL_EXPORTER_OTLP_ENDPOINT on the operator"},
		{"untraced", "id", "", "tracing may be off"},
		{"old", "url", "", "Gitea default/old has no status.lastReconcile: its operator is older than kdag's reconcile summary"},
	} {
		t.Run(tc.owner+" -o "+tc.format, func(t *testing.T) {
			var out bytes.Buffer
			err := writeTrace(&out, upgradingTree(t, tc.owner, 0), tc.format, "http://127.0.0.1:16686")
			if tc.wantErr == "" {
				if err != nil || out.String() != tc.want {
					t.Errorf("got %q, %v; want %q", out.String(), err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || out.Len() > 0 {
				t.Errorf("got %q, %v; want no output and an error with %q", out.String(), err, tc.wantErr)
			}
		})
	}
}
