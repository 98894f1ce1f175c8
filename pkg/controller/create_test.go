package controller_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestCreateIfAbsent checks, against the real API server, the precondition create relies on:
// an apply carrying "1" creates a missing object and refuses, without
// writing, to touch an existing one.
func TestCreateIfAbsent(t *testing.T) {
	f := newFixture(t, widgetRM{})
	ctx := context.Background()
	desired := func(value string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": f.ns, "name": "cm"},
			"data":     map[string]any{"k": value},
		}}
	}

	first := desired("first")
	if err := controller.Engine(f.reconciler()).CreateIfAbsent(ctx, first); err != nil {
		t.Fatalf("createIfAbsent of a missing object: %v", err)
	}
	created := f.get(&corev1.ConfigMap{}, "cm").(*corev1.ConfigMap)
	if created.Data["k"] != "first" {
		t.Errorf("created data %v, want k=first", created.Data)
	}
	if rv := first.GetResourceVersion(); rv != created.ResourceVersion || rv == "1" {
		t.Errorf("desired holds resourceVersion %q after the create, want the server's %q", rv, created.ResourceVersion)
	}

	second := desired("second")
	err := controller.Engine(f.reconciler()).CreateIfAbsent(ctx, second)
	if !apierrors.IsConflict(err) {
		t.Fatalf("createIfAbsent of an existing object: error %v, want a Conflict", err)
	}
	if rv := second.GetResourceVersion(); rv != "" {
		t.Errorf("desired keeps resourceVersion %q after the refused create, want it cleared for the next apply", rv)
	}
	if after := f.get(&corev1.ConfigMap{}, "cm").(*corev1.ConfigMap); after.ResourceVersion != created.ResourceVersion || after.Data["k"] != "first" {
		t.Errorf("existing object was written: resourceVersion %s → %s, data %v", created.ResourceVersion, after.ResourceVersion, after.Data)
	}
}

// TestCreate_OneRequestPerNewObject checks that creating an owner's objects costs one write per
// object and no uncached read, and that a foreign object is still found and left alone.
func TestCreate_OneRequestPerNewObject(t *testing.T) {
	for _, tc := range []struct {
		name        string
		foreign     bool
		wantWrites  int // ConfigMap, Secret, Service, Deployment: the Deployment waits for the ConfigMap
		wantReads   int
		wantRefused bool
	}{
		{name: "all new", wantWrites: 4},
		{name: "foreign ConfigMap", foreign: true, wantWrites: 2, wantReads: 1, wantRefused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, widgetRM{readyDeployment: true})
			foreignData := map[string]string{"k": "theirs"}
			if tc.foreign {
				f.preCreateConfig("app", foreignData)
			}
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "ours"}})
			f.calls.Reset()
			err := f.reconcile("app")
			if (err != nil) != tc.wantRefused {
				t.Fatalf("reconcile error %v, want one: %v", err, tc.wantRefused)
			}
			if tc.wantRefused && !strings.Contains(err.Error(), "ConfigMap "+f.ns+"/app-config") {
				t.Errorf("reconcile error %q does not name the foreign ConfigMap", err)
			}
			_, reads := f.calls.snapshot()
			if len(reads) != tc.wantReads {
				t.Errorf("first reconcile made %d uncached reads %v, want %d", len(reads), reads, tc.wantReads)
			}
			var writes []string
			for _, w := range f.objectWrites() {
				if !strings.Contains(w, "/widgets/") {
					writes = append(writes, w)
				}
			}
			if len(writes) != tc.wantWrites {
				t.Errorf("first reconcile wrote objects %d times %v, want %d (one per object)", len(writes), writes, tc.wantWrites)
			}
			// The conditional create of a foreign object is refused by the server, unwritten.
			if _, _, _, refused := f.calls.split(); len(refused) != btoi(tc.wantRefused) {
				t.Errorf("%d writes refused with 409, want %d", len(refused), btoi(tc.wantRefused))
			}
			if tc.foreign {
				cm := f.get(&corev1.ConfigMap{}, "app-config").(*corev1.ConfigMap)
				if !maps.Equal(cm.Data, foreignData) || cm.Labels[kdagv1alpha1.LabelOwnerUID] != "" {
					t.Errorf("foreign ConfigMap was changed: data %v labels %v", cm.Data, cm.Labels)
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestEvents_OneEventPerReasonAndReconcile checks that a first deploy records one Created event
// naming every object it created, instead of one event per object.
func TestEvents_OneEventPerReasonAndReconcile(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
	if err := f.reconcile("app"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	ev := f.waitEvent("app", corev1.EventTypeNormal, "Created")
	for _, want := range []string{"Created 4 objects:", "ConfigMap " + f.ns + "/app-config", "Secret " + f.ns + "/app-secret",
		"Service " + f.ns + "/app", "Deployment " + f.ns + "/app"} {
		if !strings.Contains(ev.Note, want) {
			t.Errorf("Created event note %q does not contain %q", ev.Note, want)
		}
	}
	f.waitEvent("app", corev1.EventTypeNormal, "Ready")
	if n := len(f.events("Created")); n != 1 {
		t.Errorf("%d Created events, want 1 for the whole reconcile", n)
	}
	if ev.Series != nil {
		t.Errorf("Created event has a series %+v: it was recorded more than once", ev.Series)
	}
}
