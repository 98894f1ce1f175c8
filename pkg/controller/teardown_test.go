package controller_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// cleaningRM is widgetRM with a Cleaner that records its calls, fails the first failFirst
// calls, and counts the owner's objects left on the API server when it runs.
type cleaningRM struct {
	widgetRM
	rec *cleanups
}

type cleanups struct {
	mu        sync.Mutex
	failFirst int
	calls     int
	leftover  []string // owned objects that still existed at each call
}

func (rm cleaningRM) Cleanup(ctx context.Context, owner *testapi.Widget) error {
	var left []string
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceList{}, &appsv1.DeploymentList{}} {
		if err := env.Client.List(ctx, list, client.InNamespace(owner.GetNamespace()),
			client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(owner.GetUID())}); err != nil {
			return err
		}
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			left = append(left, it.(client.Object).GetName())
		}
	}
	rm.rec.mu.Lock()
	defer rm.rec.mu.Unlock()
	rm.rec.calls++
	rm.rec.leftover = append(rm.rec.leftover, left...)
	if rm.rec.calls <= rm.rec.failFirst {
		return errors.New("external bucket still in use")
	}
	return nil
}

// deleteAndFinalize deletes the named Widget and reconciles until the API server no longer has
// it. It returns the reconcile errors, in order (onErr, if not nil, runs after each of them),
// and, for each path DELETE requests went to, the numbers of the reconciles that sent them.
func (f *fixture) deleteAndFinalize(name string, onErr func(error)) ([]error, map[string][]int) {
	f.t.Helper()
	w := f.get(&testapi.Widget{}, name)
	if err := f.cl.Delete(context.Background(), w); err != nil {
		f.t.Fatalf("delete widget: %v", err)
	}
	cached := &testapi.Widget{}
	f.waitCached(cached, name, "cache sees the deletion", func() bool { return !cached.GetDeletionTimestamp().IsZero() })
	var errs []error
	deletes := map[string][]int{}
	round := 0
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		round++
		f.calls.Reset()
		err := f.reconcile(name)
		for _, w := range f.objectWrites() {
			if verb, path, _ := strings.Cut(w, " "); verb == "DELETE" {
				deletes[path] = append(deletes[path], round)
			}
		}
		if err != nil {
			errs = append(errs, err)
			if onErr != nil {
				onErr(err)
			}
		}
		return f.notFound(&testapi.Widget{}, name), nil
	})
	if err != nil {
		f.t.Fatalf("widget %s not gone within 20 s; reconcile errors: %v", name, errs)
	}
	return errs, deletes
}

func TestTeardown_DependentsDeletedBeforeBlockers(t *testing.T) {
	tests := []struct {
		name        string
		rm          func(*cleanups) controller.ResourceManager[*testapi.Widget]
		opts        []controller.Options
		wantCleanup bool
	}{
		{name: "Options.OrderedTeardown", rm: func(*cleanups) controller.ResourceManager[*testapi.Widget] { return widgetRM{readyDeployment: true} },
			opts: []controller.Options{{OrderedTeardown: true}}},
		{name: "Cleaner", rm: func(c *cleanups) controller.ResourceManager[*testapi.Widget] {
			return cleaningRM{widgetRM{readyDeployment: true}, c}
		},
			wantCleanup: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &cleanups{}
			f := newFixture(t, tt.rm(rec), tt.opts...)
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 3, Data: map[string]string{"k": "v"}})
			f.settle("app")
			if w := f.get(&testapi.Widget{}, "app"); !controllerutil.ContainsFinalizer(w, kdagv1alpha1.Finalizer) {
				t.Fatalf("widget finalizers %v, want %s", w.GetFinalizers(), kdagv1alpha1.Finalizer)
			}

			errs, deletes := f.deleteAndFinalize("app", nil)
			if len(errs) != 0 {
				t.Errorf("reconcile errors during teardown: %v", errs)
			}
			base := "/api/v1/namespaces/" + f.ns
			deploy := "/apis/apps/v1/namespaces/" + f.ns + "/deployments/app"
			want := []string{deploy, base + "/configmaps/app-config", base + "/secrets/app-secret", base + "/services/app"}
			if got := slices.Sorted(maps.Keys(deletes)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Fatalf("DELETE requests %v, want each of %v", got, want)
			}
			// The Deployment depends on the ConfigMap and the Secret: they are deleted in a
			// later reconcile, once the Deployment is gone.
			for _, blocker := range []string{base + "/configmaps/app-config", base + "/secrets/app-secret"} {
				if slices.Max(deletes[deploy]) >= slices.Min(deletes[blocker]) {
					t.Errorf("DELETE in reconcile #: %v; want the Deployment deleted before its blocker %s", deletes, blocker)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if tt.wantCleanup {
				if rec.calls != 1 || len(rec.leftover) != 0 {
					t.Errorf("Cleanup called %d times with objects %v left, want once after every object is gone", rec.calls, rec.leftover)
				}
			}
			f.waitEvent("app", corev1.EventTypeNormal, "Deleted")
		})
	}
}

func TestTeardown_CleanupErrorKeepsFinalizerAndRetries(t *testing.T) {
	rec := &cleanups{failFirst: 1}
	f := newFixture(t, cleaningRM{widgetRM{readyDeployment: true}, rec})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")

	errs, _ := f.deleteAndFinalize("app", func(error) {
		w := f.get(&testapi.Widget{}, "app")
		if !controllerutil.ContainsFinalizer(w, kdagv1alpha1.Finalizer) {
			t.Errorf("finalizers %v after a failed cleanup, want %s kept", w.GetFinalizers(), kdagv1alpha1.Finalizer)
		}
	})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "external bucket still in use") || isTerminalErr(errs[0]) {
		t.Errorf("reconcile errors %v, want one transient cleanup error", errs)
	}
	ev := f.waitEvent("app", corev1.EventTypeWarning, kdagv1alpha1.ReasonCleanupFailed)
	if !strings.Contains(ev.Note, "external bucket still in use") {
		t.Errorf("CleanupFailed event note %q does not carry the error", ev.Note)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.calls != 2 {
		t.Errorf("Cleanup called %d times, want 2 (failed once, then retried)", rec.calls)
	}
}

func TestTeardown_NoFinalizerWithoutCleanerOrOrderedTeardown(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")
	if fin := f.get(&testapi.Widget{}, "app").GetFinalizers(); len(fin) != 0 {
		t.Fatalf("widget finalizers %v, want none", fin)
	}
}

func TestTeardown_FailedDeleteIsReturnedAndRetried(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true}, controller.Options{OrderedTeardown: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 3})
	f.settle("app")

	deploy := "/apis/apps/v1/namespaces/" + f.ns + "/deployments/app"
	f.calls.FailNext("DELETE", deploy, 1)
	errs, deletes := f.deleteAndFinalize("app", nil)
	// Nothing else would wake the owner: a failed DELETE produces no watch event, so the
	// reconcile must fail to be retried with backoff.
	if len(errs) == 0 || isTerminalErr(errs[0]) || !strings.Contains(errs[0].Error(), "Deployment "+f.ns+"/app") {
		t.Errorf("reconcile errors %v, want a transient error naming the Deployment", errs)
	}
	base := "/api/v1/namespaces/" + f.ns
	cm := base + "/configmaps/app-config"
	if len(deletes[deploy]) < 2 || len(deletes[cm]) == 0 || slices.Max(deletes[deploy]) >= slices.Min(deletes[cm]) {
		t.Errorf("DELETE in reconcile #: %v; want the Deployment (retried) deleted before the ConfigMap", deletes)
	}
}
