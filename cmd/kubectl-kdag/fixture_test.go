package main

import (
	"context"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

const group = "gitea.kdag.dev"

// owner returns an unstructured kdag owner with the given status.
func owner(t *testing.T, kind, name string, generation int64, st kdagv1alpha1.Status) *unstructured.Unstructured {
	t.Helper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		t.Fatal(err)
	}
	raw["url"] = "http://" + name // an owner's own status field, which the plugin ignores
	u := &unstructured.Unstructured{Object: map[string]any{"status": raw}}
	u.SetAPIVersion(group + "/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace("default")
	u.SetName(name)
	u.SetGeneration(generation)
	return u
}

func ready(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
	return []metav1.Condition{{Type: kdagv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: 1}}
}

// demoObjects is a Gitea whose PostgreSQL waits for its StatefulSet, whose Valkey is ready and
// whose GiteaServer is blocked and not created yet.
func demoObjects(t *testing.T) []*unstructured.Unstructured {
	gitea := owner(t, "Gitea", "demo", 1, kdagv1alpha1.Status{
		ObservedGeneration: 1, OperatorVersion: "dev",
		Conditions: ready(metav1.ConditionFalse, "WaitingForNodes", "waiting for PostgreSQL default/demo-postgresql"),
		Graph: &kdagv1alpha1.GraphSummary{
			Total: 4, Ready: 2, Waiting: 1, Blocked: 1,
			NotReady: []kdagv1alpha1.NodeStatus{
				{Kind: "PostgreSQL", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeWaiting,
					Message: "waiting for StatefulSet default/demo-postgresql:\nAvailable: 0 of 1 replicas ready"},
				{Kind: "GiteaServer", Namespace: "default", Name: "demo", State: kdagv1alpha1.NodeBlocked,
					Message: "waiting for PostgreSQL default/demo-postgresql"},
			},
			Nodes: []kdagv1alpha1.GraphNode{
				{Kind: "Secret", Namespace: "default", Name: "demo-admin", State: kdagv1alpha1.NodeReady},
				{Group: group, Kind: "PostgreSQL", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeWaiting},
				{Group: group, Kind: "Valkey", Namespace: "default", Name: "demo-valkey", State: kdagv1alpha1.NodeReady},
				{Group: group, Kind: "GiteaServer", Namespace: "default", Name: "demo", State: kdagv1alpha1.NodeBlocked, Blockers: "0-2"},
			},
		},
	})
	pg := owner(t, "PostgreSQL", "demo-postgresql", 1, kdagv1alpha1.Status{
		ObservedGeneration: 1, OperatorVersion: "dev",
		Conditions: ready(metav1.ConditionFalse, "WaitingForNodes", "waiting for StatefulSet default/demo-postgresql"),
		Graph: &kdagv1alpha1.GraphSummary{
			Total: 3, Ready: 2, Waiting: 1,
			NotReady: []kdagv1alpha1.NodeStatus{{Kind: "StatefulSet", Namespace: "default", Name: "demo-postgresql",
				State: kdagv1alpha1.NodeWaiting, Message: "Available: 0 of 1 replicas ready"}},
			Nodes: []kdagv1alpha1.GraphNode{
				{Kind: "Secret", Namespace: "default", Name: "demo-postgresql-auth", State: kdagv1alpha1.NodeReady},
				{Kind: "Service", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeReady},
				{Group: "apps", Kind: "StatefulSet", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeWaiting, Blockers: "0-1"},
			},
		},
	})
	vk := owner(t, "Valkey", "demo-valkey", 1, kdagv1alpha1.Status{
		ObservedGeneration: 1, OperatorVersion: "dev",
		Conditions: ready(metav1.ConditionTrue, "Ready", "2 nodes ready"),
		Graph: &kdagv1alpha1.GraphSummary{
			Total: 2, Ready: 2,
			Nodes: []kdagv1alpha1.GraphNode{
				{Kind: "ConfigMap", Namespace: "default", Name: "demo-valkey", State: kdagv1alpha1.NodeReady},
				{Group: "apps", Kind: "StatefulSet", Namespace: "default", Name: "demo-valkey", State: kdagv1alpha1.NodeReady, Blockers: "0"},
			},
		},
	})
	plain := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"phase": "Running"}}}
	plain.SetAPIVersion(group + "/v1alpha1")
	plain.SetKind("Gitea")
	plain.SetNamespace("default")
	plain.SetName("not-kdag")
	return []*unstructured.Unstructured{gitea, pg, vk, plain}
}

// fakeDiscovery publishes the demo's custom resources and a few built-in ones.
func fakeDiscovery() *fakediscovery.FakeDiscovery {
	res := func(name, singular, kind, short string) metav1.APIResource {
		r := metav1.APIResource{Name: name, SingularName: singular, Kind: kind, Namespaced: true, Verbs: metav1.Verbs{"get", "list"}}
		if short != "" {
			r.ShortNames = []string{short}
		}
		return r
	}
	return &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: group + "/v1alpha1", APIResources: []metav1.APIResource{
			res("giteas", "gitea", "Gitea", "gt"),
			res("giteaservers", "giteaserver", "GiteaServer", "gtsrv"),
			res("postgresqls", "postgresql", "PostgreSQL", "gtpg"),
			res("valkeys", "valkey", "Valkey", "gtvk"),
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			res("secrets", "secret", "Secret", ""),
			res("services", "service", "Service", "svc"),
			res("configmaps", "configmap", "ConfigMap", "cm"),
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{res("statefulsets", "statefulset", "StatefulSet", "sts")}},
	}}}
}

// newTestReader returns a reader over a fake cluster holding objs, and the fake dynamic client.
// The objects are created through their discovered resources: the fake's own guess of a
// resource from its kind is wrong for Valkey (valkies).
func newTestReader(t *testing.T, warn io.Writer, objs ...*unstructured.Unstructured) (*reader, *fakedynamic.FakeDynamicClient) {
	t.Helper()
	mapper := newMapper(fakeDiscovery(), warn)
	dyn := fakedynamic.NewSimpleDynamicClient(runtime.NewScheme())
	for _, o := range objs {
		m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(m.Resource).Namespace(o.GetNamespace()).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dyn.ClearActions()
	return &reader{client: dyn, mapper: mapper, warn: warn}, dyn
}

// testNow is the current time of the tests' renderings.
var testNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

const testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// upgradingObjects is a Gitea during an upgrade (issue 15 item 3): its GiteaServer has held
// Ready back for 2m5s; the last reconcile's critical path ran the PostgreSQL, then the server.
// The PostgreSQL is Ready, with a critical path of its own.
func upgradingObjects(t *testing.T) []*unstructured.Unstructured {
	gitea := owner(t, "Gitea", "demo", 2, kdagv1alpha1.Status{
		ObservedGeneration: 2, OperatorVersion: "dev",
		Conditions: ready(metav1.ConditionFalse, kdagv1alpha1.ReasonWaiting, "waiting for GiteaServer default/demo (migrating to 1.27.4)"),
		Graph: &kdagv1alpha1.GraphSummary{
			Total: 4, Ready: 3, Waiting: 1,
			NotReady: []kdagv1alpha1.NodeStatus{{Kind: "GiteaServer", Namespace: "default", Name: "demo", State: kdagv1alpha1.NodeWaiting,
				Message: "migrating to 1.27.4"}},
			Nodes: []kdagv1alpha1.GraphNode{
				{Kind: "Secret", Namespace: "default", Name: "demo-admin", State: kdagv1alpha1.NodeReady},
				{Group: group, Kind: "PostgreSQL", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeReady},
				{Group: group, Kind: "Valkey", Namespace: "default", Name: "demo-valkey", State: kdagv1alpha1.NodeReady},
				{Group: group, Kind: "GiteaServer", Namespace: "default", Name: "demo", State: kdagv1alpha1.NodeWaiting, Blockers: "0-2"},
			},
		},
		WaitingFor: &kdagv1alpha1.WaitingFor{Group: group, Kind: "GiteaServer", Namespace: "default", Name: "demo",
			State: kdagv1alpha1.NodeWaiting, Since: metav1.NewTime(testNow.Add(-125 * time.Second))},
		LastReconcile: &kdagv1alpha1.ReconcileSummary{TraceID: testTraceID, DurationMillis: 1520, CriticalPath: []kdagv1alpha1.PathNode{
			{Group: group, Kind: "PostgreSQL", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeReady, RunMillis: 1200},
			{Group: group, Kind: "GiteaServer", Namespace: "default", Name: "demo", State: kdagv1alpha1.NodeWaiting, WaitMillis: 3, RunMillis: 310},
		}},
	})
	pg := owner(t, "PostgreSQL", "demo-postgresql", 1, kdagv1alpha1.Status{
		ObservedGeneration: 1, OperatorVersion: "dev",
		Conditions: ready(metav1.ConditionTrue, kdagv1alpha1.ReasonReady, "2 nodes ready"),
		Graph: &kdagv1alpha1.GraphSummary{
			Total: 2, Ready: 2,
			Nodes: []kdagv1alpha1.GraphNode{
				{Kind: "Secret", Namespace: "default", Name: "demo-postgresql-auth", State: kdagv1alpha1.NodeReady},
				{Group: "apps", Kind: "StatefulSet", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeReady, Blockers: "0"},
			},
		},
		LastReconcile: &kdagv1alpha1.ReconcileSummary{TraceID: "0af7651916cd43dd8448eb211c80319c", DurationMillis: 2100, CriticalPath: []kdagv1alpha1.PathNode{
			{Kind: "Secret", Namespace: "default", Name: "demo-postgresql-auth", State: kdagv1alpha1.NodeReady, RunMillis: 40},
			{Group: "apps", Kind: "StatefulSet", Namespace: "default", Name: "demo-postgresql", State: kdagv1alpha1.NodeReady, WaitMillis: 1, RunMillis: 2050},
		}},
	})
	// An owner whose operator traces nothing, and one whose operator predates lastReconcile.
	untraced := owner(t, "Gitea", "untraced", 1, kdagv1alpha1.Status{
		ObservedGeneration: 1, OperatorVersion: "dev",
		Conditions:    ready(metav1.ConditionTrue, kdagv1alpha1.ReasonReady, "1 nodes ready"),
		Graph:         &kdagv1alpha1.GraphSummary{Total: 1, Ready: 1, Nodes: []kdagv1alpha1.GraphNode{{Kind: "Secret", Namespace: "default", Name: "u", State: kdagv1alpha1.NodeReady}}},
		LastReconcile: &kdagv1alpha1.ReconcileSummary{DurationMillis: 12, CriticalPath: []kdagv1alpha1.PathNode{{Kind: "Secret", Namespace: "default", Name: "u", State: kdagv1alpha1.NodeReady, RunMillis: 12}}},
	})
	old := owner(t, "Gitea", "old", 1, kdagv1alpha1.Status{
		ObservedGeneration: 1, OperatorVersion: "v0.4.0",
		Conditions: ready(metav1.ConditionTrue, kdagv1alpha1.ReasonReady, "1 nodes ready"),
		Graph:      &kdagv1alpha1.GraphSummary{Total: 1, Ready: 1, Nodes: []kdagv1alpha1.GraphNode{{Kind: "Secret", Namespace: "default", Name: "o", State: kdagv1alpha1.NodeReady}}},
	})
	return []*unstructured.Unstructured{gitea, pg, untraced, old}
}
