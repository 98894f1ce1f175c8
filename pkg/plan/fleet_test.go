package plan_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestSummarize(t *testing.T) {
	ch := func(a apply.Action, kind, name string, fields ...string) plan.Change {
		return plan.Change{Action: a, Kind: kind, Namespace: "ns", Name: name, Fields: fields, Reason: string(a) + " " + name}
	}
	plans := []plan.OwnerPlan{
		{Owner: "W ns/unchanged", Changes: []plan.OwnerChanges{{Owner: "W ns/unchanged", Exists: true, Changes: []plan.Change{ch(apply.Skipped, "ConfigMap", "a")}}}},
		{Owner: "W ns/a", Changes: []plan.OwnerChanges{
			{Owner: "W ns/a", Exists: true, Changes: []plan.Change{ch(apply.Applied, "ConfigMap", "a1", "data.x", "metadata.annotations[kdag.dev/desired-hash]"), ch(apply.Applied, "ConfigMap", "a2", "data.x")}},
			{Owner: "V ns/a-child", Exists: true, Changes: []plan.Change{ch(apply.Recreating, "Job", "a3", "spec.template"), ch(apply.Created, "Service", "a4")}},
		}},
		{Owner: "W ns/b", Changes: []plan.OwnerChanges{{Owner: "W ns/b", Exists: true, Changes: []plan.Change{
			ch(apply.Applied, "ConfigMap", "b1", "data.x", "data.y"), ch(apply.Refused, "Secret", "b2"),
			{Action: apply.Applied, Kind: "Deployment", Namespace: "ns", Name: "b3", Error: "invalid"},
		}}}},
		{Owner: "W ns/failed", Error: "list Secrets: forbidden"},
	}
	s := plan.Summarize(plans)
	if s.Owners != 4 || s.Unchanged != 1 || s.Changed != 2 || s.Failed != 2 {
		t.Errorf("owners %d, unchanged %d, changed %d, failed %d; want 4, 1, 2, 2", s.Owners, s.Unchanged, s.Changed, s.Failed)
	}
	wantActions := []plan.ActionCount{{Action: apply.Created, Owners: 1, Objects: 1}, {Action: apply.Applied, Owners: 2, Objects: 4},
		{Action: apply.Recreating, Owners: 1, Objects: 1}, {Action: apply.Refused, Owners: 1, Objects: 1}}
	if !slices.Equal(s.Actions, wantActions) {
		t.Errorf("actions %+v, want %+v", s.Actions, wantActions)
	}
	wantFields := []plan.FieldCount{{Kind: "ConfigMap", Field: "data.x", Owners: 2, Objects: 3},
		{Kind: "ConfigMap", Field: "data.y", Owners: 1, Objects: 1}, {Kind: "Job", Field: "spec.template", Owners: 1, Objects: 1}}
	if !slices.Equal(s.Fields, wantFields) {
		t.Errorf("fields %+v, want %+v (the desired-hash annotation left out)", s.Fields, wantFields)
	}
	if want := []plan.FleetObject{{Owner: "W ns/a", Object: "Job ns/a3", Reason: "recreating a3"}}; !slices.Equal(s.Recreates, want) {
		t.Errorf("recreates %+v, want %+v", s.Recreates, want)
	}
	if want := []plan.FleetObject{{Owner: "W ns/b", Object: "Secret ns/b2", Reason: "refused b2"}}; !slices.Equal(s.Refused, want) {
		t.Errorf("refused %+v, want %+v", s.Refused, want)
	}
	wantErrors := []plan.FleetObject{{Owner: "W ns/b", Object: "Deployment ns/b3", Reason: "invalid"}, {Owner: "W ns/failed", Reason: "list Secrets: forbidden"}}
	if !slices.Equal(s.Errors, wantErrors) {
		t.Errorf("errors %+v, want %+v", s.Errors, wantErrors)
	}
	if got := plan.ExitCode(plan.FleetStatus(plans)); got != 2 {
		t.Errorf("FleetStatus exit %d, want 2 (a failed owner)", got)
	}
	if got := plan.ExitCode(plan.FleetStatus(plans[:2])); got != 1 {
		t.Errorf("FleetStatus exit %d, want 1 (changes)", got)
	}
	if got := plan.ExitCode(plan.FleetStatus(plans[:1])); got != 0 {
		t.Errorf("FleetStatus exit %d, want 0 (nothing changes)", got)
	}

	for _, tc := range []struct {
		format  plan.Format
		details bool
		want    []string
		not     []string
	}{
		{plan.Text, false, []string{"4 owners planned: 1 unchanged, 2 changed, 2 failed\n", "Update    2       4\n",
			"ConfigMap data.x         2       3\n", "Recreate (1):\n  W ns/a: Job ns/a3: recreating a3\n", "Errors (2):\n  W ns/b: Deployment ns/b3: invalid\n  W ns/failed: list Secrets: forbidden\n"},
			[]string{"W ns/unchanged", "Update     ConfigMap"}},
		{plan.Text, true, []string{"W ns/a\n  Update     ConfigMap ns/a1\n", "V ns/a-child\n  Recreate   Job ns/a3\n", "W ns/failed\n  error: list Secrets: forbidden\n"},
			[]string{"W ns/unchanged"}},
		{plan.YAML, false, []string{"summary:\n  owners: 4\n", "  fields:\n    - kind: ConfigMap\n      field: data.x\n"}, []string{"\nowners:"}},
		{plan.YAML, true, []string{"\nowners:\n  - owner: W ns/unchanged\n"}, nil},
		{plan.JSON, false, []string{"\"summary\": {\n    \"owners\": 4,"}, []string{"\"owners\": ["}},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			var out bytes.Buffer
			if err := plan.WriteFleet(&out, plans, tc.format, tc.details); err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			for _, not := range tc.not {
				if strings.Contains(out.String(), not) {
					t.Errorf("output has %q:\n%s", not, out.String())
				}
			}
		})
	}
}

func TestRun_FleetFlagErrors(t *testing.T) {
	checkUsageErrors(t, []usageError{
		{"--all without --live", []string{"--all"}, "--all needs --live"},
		{"-A without --all", []string{"--live", "widget/shop", "-A"}, "go with --live --all"},
		{"-l without --all", []string{"--live", "widget/shop", "-l", "a=b"}, "go with --live --all"},
		{"--details without --all", []string{"--live", "widget/shop", "--details"}, "go with --live --all"},
		{"-A with -n", []string{"--live", "--all", "-A", "-n", "x"}, "drop -n"},
		{"--all with a file", []string{"--live", "--all", "-f", "testdata/widgets.yaml"}, "no -f FILE"},
		{"--all with TYPE/NAME", []string{"--live", "--all", "widget/shop"}, "no TYPE/NAME"},
		{"--all mermaid", []string{"--live", "--all", "-o", "mermaid"}, `unknown output "mermaid" for --live`},
	})
}

// TestListOwners lists the Widgets of two namespaces by namespace and label selector: a Widget
// whose controller is a listed Widget is left out (planned through its owner), and listed when
// the selector leaves its owner out.
func TestListOwners(t *testing.T) {
	env := api.Env(t)
	p, err := plan.New(options(t))
	if err != nil {
		t.Fatal(err)
	}
	a, b := namespace(t, env, "fleet-list-a"), namespace(t, env, "fleet-list-b")
	widget := func(ns, name, tier string, owner *testapi.Widget) *testapi.Widget {
		w := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tier": tier}}, Spec: testapi.WidgetSpec{MaxReplicas: 3}}
		if owner != nil {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: testapi.GroupVersion.String(), Kind: "Widget", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		}
		if err := env.Client.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	parent := widget(a, "parent", "prod", nil)
	widget(a, "parent-child", "dev", parent)
	widget(a, "solo", "dev", nil)
	widget(b, "other", "prod", nil)
	for _, tc := range []struct {
		name      string
		namespace string
		selector  string
		want      []string
	}{
		{"a namespace", a, "", []string{a + "/parent", a + "/solo"}},
		{"all namespaces", "", "", []string{a + "/parent", a + "/solo", b + "/other"}},
		{"a selector over all namespaces", "", "tier=prod", []string{a + "/parent", b + "/other"}},
		{"a selector that leaves the owner out", a, "tier=dev", []string{a + "/parent-child", a + "/solo"}},
		{"nothing matches", b, "tier=dev", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := labels.Parse(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			owners, err := p.ListOwners(t.Context(), env.Client, tc.namespace, sel)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range owners {
				if tc.namespace == "" && o.GetNamespace() != a && o.GetNamespace() != b {
					continue // other tests' Widgets
				}
				got = append(got, client.ObjectKeyFromObject(o).String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ListOwners(%q, %q) = %q, want %q", tc.namespace, tc.selector, got, tc.want)
			}
		})
	}
}

// TestRun_FleetUnchanged plans, as a fleet, a namespace whose one owner kdag applied and that did
// not change since: exit status 0 and one unchanged owner, reads and dry runs only; with -A, the
// other tests' namespaces too.
func TestRun_FleetUnchanged(t *testing.T) {
	env := api.Env(t)
	// The plan's workers are done when Run returns; the HTTP client's kept-alive connections
	// and client-go's caches are not the plan's.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*Typed[...]).updateUnfinishedWorkLoop"))
	ns := namespace(t, env, "fleet-unchanged")
	applied(t, env, ns, testapi.WidgetSpec{MaxReplicas: 10, Data: data})
	cfg := rest.CopyConfig(env.Config)
	rec := &recorder{}
	cfg.Wrap(rec.wrap)
	var out bytes.Buffer
	err := plan.Run(t.Context(), []string{"--live", "--all", "-n", ns}, &out, liveOptions(t, cfg))
	if err != nil {
		t.Fatalf("Run = %v, want nil (nothing changes)\n%s", err, out.String())
	}
	if want := "1 owners planned: 1 unchanged, 0 changed, 0 failed\n\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	for _, req := range rec.mutating {
		if !strings.Contains(req, "dryRun=All") {
			t.Errorf("request without dryRun=All: %s", req)
		}
	}
	out.Reset()
	// Other tests' Widgets are in other namespaces, some of them invalid: whatever they give,
	// this one is counted and unchanged, and nothing is written.
	err = plan.Run(t.Context(), []string{"--live", "--all", "-A", "-o", "json", "--details"}, &out, liveOptions(t, cfg))
	if errors.Is(err, plan.ErrChanges) || err == nil {
		t.Logf("Run -A = %v", err)
	}
	if want := "\"owner\": \"Widget " + ns + "/shop\""; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %s:\n%s", want, out.String())
	}
	for _, req := range rec.mutating {
		if !strings.Contains(req, "dryRun=All") {
			t.Errorf("request without dryRun=All: %s", req)
		}
	}
}
