package plan_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// api is the API server of the live plan's tests, started by the first test that needs it.
var api = controllertest.NewAPIServer(envtest.Options{CRDs: testapi.CRDs()}, testapi.AddToScheme)

func TestMain(m *testing.M) { api.Main(m) }

// shop is the live plan's test component: a ConfigMap and a Secret from the Widget's data, a Job
// whose image is data's "image" (a Job's template is immutable; data's "recreate", when set, is
// its Recreate propagation), and, switched on by
// components, a ConfigMap "extra" and a kept ConfigMap "kept".
type shop struct{}

func (shop) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &batchv1.Job{}}
}

func (shop) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}, Data: map[string]string{"greeting": w.Spec.Data["greeting"]}})
	b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-token"}, StringData: map[string]string{"token": w.Spec.Data["token"]}})
	var jobOpts []controller.NodeOption
	if w.Spec.Data["recreate"] != "" {
		jobOpts = append(jobOpts, controller.Recreate(metav1.DeletionPropagation(w.Spec.Data["recreate"])))
	}
	b.Add(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-migrate"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "migrate", Image: w.Spec.Data["image"]}},
		}}},
	}, jobOpts...)
	for _, c := range w.Spec.Components {
		switch c {
		case "extra":
			b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-extra"}})
		case "kept":
			b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-kept"}}, controller.Keep())
		}
	}
	return nil
}

var shopComponent = controller.For("shop", shop{})

func liveOptions(t testing.TB, cfg *rest.Config) plan.Options {
	return plan.Options{
		Scheme:     newScheme(t),
		Components: []controller.Component{shopComponent},
		CRDs:       os.DirFS("../testing/testapi/crd"),
		RESTConfig: cfg,
	}
}

// data is the spec every case starts from: kdag applied the Widget with it.
var data = map[string]string{"greeting": "hello", "token": "s3cret-one", "image": "busybox:1.36"}

// with returns a copy of data with the changes kv (key, value, key, value...).
func with(kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range data {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// applied creates the Widget shop in ns with spec and applies its graph as a reconcile does
// (the apply engine, each node's desired object from plan.Plan.Render). It returns the
// Widget.
func applied(t *testing.T, env *envtest.Environment, ns string, spec testapi.WidgetSpec) *testapi.Widget {
	t.Helper()
	ctx := t.Context()
	w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: spec}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	p, err := shopComponent.Plan(ctx, w, env.Scheme, env.Client.RESTMapper())
	if err != nil {
		t.Fatal(err)
	}
	owner := apply.Owner{Object: w, Kind: "Widget", Controller: shopComponent.Name()}
	nodes, err := p.Render(owner, env.Scheme, func(graph.NodeID) *unstructured.Unstructured { return nil })
	if err != nil {
		t.Fatal(err)
	}
	engine, err := apply.New(env.Client, env.Client, nil, apply.Options{FieldManager: shopComponent.FieldManager()})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if _, err := engine.Apply(ctx, owner, n.Desired, nil, apply.Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// namespace creates the namespace name.
func namespace(t *testing.T, env *envtest.Environment, name string) string {
	t.Helper()
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// widgetFile writes the Widget shop with spec to a file and returns its path.
func widgetFile(t *testing.T, spec testapi.WidgetSpec) string {
	t.Helper()
	raw, err := yaml.Marshal(map[string]any{
		"apiVersion": "testing.kdag.dev/v1alpha1", "kind": "Widget", "metadata": map[string]any{"name": "shop"}, "spec": spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var hashLine = regexp.MustCompile(`(kdag\.dev/(?:desired|dependencies)-hash: ).*`)

// normalized replaces what differs between runs (the owner's UID, hashes over it) in out.
func normalized(out string, owner *testapi.Widget) string {
	if owner != nil {
		out = strings.ReplaceAll(out, string(owner.UID), "<owner-uid>")
	}
	return hashLine.ReplaceAllString(out, "${1}<hash>")
}

// assertGolden compares got with testdata/live/<name>.golden, or writes it with -update (the
// flag of controllertest's golden plans).
func assertGolden(t *testing.T, got, name string) {
	t.Helper()
	path := filepath.Join("testdata", "live", name+".golden")
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden output: %v; write it with go test ./pkg/plan/ -run '%s' -update", err, t.Name())
	}
	if diff := controllertest.Diff(string(want), got); diff != "" {
		t.Errorf("output differs from %s %s\nwhole output:\n%s", path, diff, got)
	}
}

// TestLive plans the Widget shop against the API server in each state that gives one of the
// live plan's actions, and compares the text output with a golden file (issue 14).
func TestLive(t *testing.T) {
	env := api.Env(t)
	base := testapi.WidgetSpec{MaxReplicas: 10, Data: data}
	for _, tc := range []struct {
		name string
		// applied is the spec kdag applied the Widget with; nil: the Widget is not on the cluster.
		applied *testapi.WidgetSpec
		// setup runs before the plan, in the case's namespace.
		setup func(t *testing.T, ns string)
		// planned is the spec planned from a file (-f), or, with onCluster, written to the Widget.
		planned   testapi.WidgetSpec
		onCluster bool
		wantErr   error
		want      []string // in the output, besides the golden file
	}{
		{name: "create", planned: base, wantErr: plan.ErrChanges, want: []string{"(not on the cluster)", "Create     ConfigMap live-create/shop-config"}},
		{name: "unchanged", applied: &base, planned: base, onCluster: true},
		{name: "update", applied: &base, planned: testapi.WidgetSpec{MaxReplicas: 10, Data: with("greeting", "bonjour", "token", "s3cret-two")},
			wantErr: plan.ErrChanges, want: []string{"-  greeting: hello", "+  greeting: bonjour", "-  token: <redacted; old value>", "+  token: <redacted; new value>"}},
		{name: "recreate", applied: &base, planned: testapi.WidgetSpec{MaxReplicas: 10, Data: with("image", "busybox:1.37")}, onCluster: true,
			wantErr: plan.ErrChanges, want: []string{"Recreate   Job live-recreate/shop-migrate", "spec.template is immutable", "Stalled"}},
		{name: "recreate-policy", applied: &testapi.WidgetSpec{MaxReplicas: 10, Data: with("recreate", "Background")},
			planned: testapi.WidgetSpec{MaxReplicas: 10, Data: with("recreate", "Background", "image", "busybox:1.37")}, onCluster: true,
			wantErr: plan.ErrChanges, want: []string{"Recreate   Job live-recreate-policy/shop-migrate", "kdag deletes the object (propagation Background)"}},
		{name: "refused", planned: base, setup: func(t *testing.T, ns string) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-config"}, Data: map[string]string{"greeting": "mine"}}
			if err := env.Client.Create(t.Context(), cm, client.FieldOwner("someone")); err != nil {
				t.Fatal(err)
			}
		}, wantErr: plan.ErrChanges, want: []string{"Refused    ConfigMap live-refused/shop-config", `field manager "someone"`}},
		{name: "prune", applied: &testapi.WidgetSpec{MaxReplicas: 10, Data: data, Components: []string{"extra"}}, planned: base, onCluster: true,
			wantErr: plan.ErrChanges, want: []string{"Prune      ConfigMap live-prune/shop-extra"}},
		{name: "keep", applied: &testapi.WidgetSpec{MaxReplicas: 10, Data: data, Components: []string{"kept"}}, planned: base,
			wantErr: plan.ErrChanges, want: []string{"Keep       ConfigMap live-keep/shop-kept", "orphaned, not deleted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, env, "live-"+tc.name)
			var owner *testapi.Widget
			if tc.applied != nil {
				owner = applied(t, env, ns, *tc.applied)
			}
			if tc.setup != nil {
				tc.setup(t, ns)
			}
			args := []string{"--live", "-f", widgetFile(t, tc.planned), "-n", ns}
			if tc.onCluster {
				owner.Spec = tc.planned
				if err := env.Client.Update(t.Context(), owner); err != nil {
					t.Fatal(err)
				}
				args = []string{"--live", "widget/shop", "-n", ns}
			}
			var out bytes.Buffer
			err := plan.Run(t.Context(), args, &out, liveOptions(t, env.Config))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Run(%v) = %v, want %v\n%s", args, err, tc.wantErr, out.String())
			}
			got := normalized(out.String(), owner)
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			for _, secret := range []string{"s3cret-one", "s3cret-two", "czNjcmV0"} {
				if strings.Contains(got, secret) {
					t.Errorf("output shows a Secret value (%s):\n%s", secret, got)
				}
			}
			assertGolden(t, got, tc.name)
		})
	}
}

// recorder counts the requests of a client and keeps the mutating ones.
type recorder struct {
	mu       sync.Mutex
	reads    int
	mutating []string // "METHOD path?query"
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		if slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodOptions}, req.Method) {
			r.reads++
		} else {
			r.mutating = append(r.mutating, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
		}
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestLive_WritesNothing plans an owner whose every kind of change is pending (update, recreate,
// prune, keep) through a transport that records every request: each mutating request carries
// dryRun=All, and the objects on the cluster are as they were (issue 14).
func TestLive_WritesNothing(t *testing.T) {
	env := api.Env(t)
	ns := namespace(t, env, "live-no-write")
	owner := applied(t, env, ns, testapi.WidgetSpec{MaxReplicas: 10, Data: data, Components: []string{"extra", "kept"}})
	before := resourceVersions(t, env, ns)
	planned := testapi.WidgetSpec{MaxReplicas: 10, Data: with("greeting", "bonjour", "token", "s3cret-two", "image", "busybox:1.37")}
	cfg := rest.CopyConfig(env.Config)
	rec := &recorder{}
	cfg.Wrap(rec.wrap)
	var out bytes.Buffer
	err := plan.Run(t.Context(), []string{"--live", "-f", widgetFile(t, planned), "-n", ns, "-o", "yaml"}, &out, liveOptions(t, cfg))
	if !errors.Is(err, plan.ErrChanges) {
		t.Fatalf("Run = %v, want ErrChanges\n%s", err, out.String())
	}
	for _, want := range []string{"action: Update", "action: Recreate", "action: Prune", "action: Keep"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if len(rec.mutating) == 0 || rec.reads == 0 {
		t.Errorf("%d reads and %d mutating requests, want dry runs and reads", rec.reads, len(rec.mutating))
	}
	for _, req := range rec.mutating {
		if !strings.Contains(req, "dryRun=All") {
			t.Errorf("request without dryRun=All: %s", req)
		}
	}
	if after := resourceVersions(t, env, ns); !slices.Equal(before, after) {
		t.Errorf("objects changed by the plan:\nbefore %v\nafter  %v", before, after)
	}
	if owner.UID == "" {
		t.Error("owner has no UID")
	}
}

// resourceVersions lists "Kind name resourceVersion" of the case's objects, sorted.
func resourceVersions(t *testing.T, env *envtest.Environment, ns string) []string {
	t.Helper()
	var out []string
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &batchv1.JobList{}, &testapi.WidgetList{}} {
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o := item.(client.Object)
			out = append(out, fmt.Sprintf("%T %s %s", o, o.GetName(), o.GetResourceVersion()))
		}
	}
	slices.Sort(out)
	return out
}

func TestRun_LiveFlagErrors(t *testing.T) {
	checkUsageErrors(t, []usageError{
		{"nothing to plan", []string{"--live"}, "--live needs TYPE/NAME, -f FILE or --all"},
		{"both", []string{"--live", "widget/shop", "-f", "testdata/widgets.yaml"}, "not both"},
		{"TYPE/NAME without --live", []string{"widget/shop"}, "needs --live"},
		{"no kubeconfig", []string{"--live", "widget/shop", "--kubeconfig", "/nonexistent"}, "load kubeconfig"},
		{"mermaid", []string{"--live", "widget/shop", "-o", "mermaid"}, `unknown output "mermaid" for --live`},
	})
}

func TestWriteChanges(t *testing.T) {
	changes := []plan.OwnerChanges{{Owner: "Widget ns/shop", Exists: true, Changes: []plan.Change{
		{Action: apply.Applied, Kind: "ConfigMap", Namespace: "ns", Name: "a", Diff: "--- live\n+++ planned\n@@ -1 +1 @@\n-x\n+y\n"},
		{Action: apply.Recreating, Kind: "Job", Namespace: "ns", Name: "b", Reason: "spec.template is immutable"},
		{Action: apply.Created, Kind: "Namespace", Name: "c", Error: "invalid"},
	}}}
	for _, tc := range []struct {
		format plan.Format
		want   string
	}{
		{plan.Text, "Widget ns/shop\n  Update     ConfigMap ns/a\n      --- live\n      +++ planned\n      @@ -1 +1 @@\n      -x\n      +y\n" +
			"  Recreate   Job ns/b\n      spec.template is immutable\n  Create     Namespace c\n      error: invalid\n\n"},
		{plan.YAML, "- owner: Widget ns/shop\n  exists: true\n  changes:\n    - action: Update\n"},
		{plan.JSON, "[\n  {\n    \"owner\": \"Widget ns/shop\",\n    \"exists\": true,\n"},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			var out bytes.Buffer
			if err := plan.WriteChanges(&out, changes, tc.format); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out.String())
			}
		})
	}
	if err := plan.WriteChanges(&bytes.Buffer{}, changes, plan.DOT); err == nil {
		t.Error("WriteChanges(dot) = nil, want an error")
	}
}

func TestStatusAndExitCode(t *testing.T) {
	of := func(cs ...plan.Change) []plan.OwnerChanges { return []plan.OwnerChanges{{Changes: cs}} }
	for _, tc := range []struct {
		name    string
		changes []plan.OwnerChanges
		want    int
	}{
		{"nothing", nil, 0},
		{"unchanged only", of(plan.Change{Action: apply.Skipped}, plan.Change{Action: apply.Skipped}), 0},
		{"a refused object differs", of(plan.Change{Action: apply.Skipped}, plan.Change{Action: apply.Refused}), 1},
		{"a create", of(plan.Change{Action: apply.Skipped}, plan.Change{Action: apply.Created}), 1},
		{"a keep", of(plan.Change{Action: apply.Orphaned}), 1},
		{"an object the API server refuses", of(plan.Change{Action: apply.Applied, Kind: "ConfigMap", Name: "a", Error: "invalid"}), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan.ExitCode(plan.Status(tc.changes)); got != tc.want {
				t.Errorf("ExitCode(Status) = %d, want %d", got, tc.want)
			}
		})
	}
}

// usageError is a command line Run refuses: an error containing wantErr, exit status 2.
type usageError struct {
	name    string
	args    []string
	wantErr string
}

// checkUsageErrors runs each command line and checks Run's error and exit status.
func checkUsageErrors(t *testing.T, cases []usageError) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := plan.Run(t.Context(), tc.args, &bytes.Buffer{}, options(t))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Run(%v) = %v, want an error with %q", tc.args, err, tc.wantErr)
			}
			if plan.ExitCode(err) != 2 {
				t.Errorf("ExitCode(%v) = %d, want 2", err, plan.ExitCode(err))
			}
		})
	}
}
