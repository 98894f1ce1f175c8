package plan_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestLive_OwnerRefused plans, from a file, a Widget whose spec the CRD refuses (a schema
// minimum, a CEL rule), on the cluster and new: the plan reports the owner's own refusal with
// the API server's message, plans none of its objects from the refused spec, and exits as an
// error (2).
func TestLive_OwnerRefused(t *testing.T) {
	env := api.Env(t)
	base := testapi.WidgetSpec{MaxReplicas: 10, Data: data}
	for _, tc := range []struct {
		name      string
		onCluster bool
		planned   testapi.WidgetSpec
		message   string // in the server's refusal
	}{
		{name: "schema", onCluster: true, planned: testapi.WidgetSpec{MaxReplicas: -1, Data: with("greeting", "bonjour")}, message: "spec.maxReplicas"},
		{name: "cel", onCluster: true, planned: testapi.WidgetSpec{MinReplicas: 5, MaxReplicas: 3, Data: with("image", "busybox:1.37")},
			message: "minReplicas must not be greater than maxReplicas"},
		{name: "new", planned: testapi.WidgetSpec{MaxReplicas: -1, Data: data}, message: "spec.maxReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, env, "live-owner-refused-"+tc.name)
			if tc.onCluster {
				applied(t, env, ns, base)
			}
			var out bytes.Buffer
			err := plan.Run(t.Context(), []string{"--live", "-f", widgetFile(t, tc.planned), "-n", ns}, &out, liveOptions(t, env.Config))
			if got := plan.ExitCode(err); got != 2 {
				t.Fatalf("ExitCode(%v) = %d, want 2 (the API server refuses the owner)\n%s", err, got, out.String())
			}
			if want := "the API server refuses Widget " + ns + "/shop"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v, want an error with %q", err, want)
			}
			got := out.String()
			for _, want := range []string{"Refused    Widget " + ns + "/shop\n", "error: ", tc.message, "its objects are not planned"} {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
			for _, planned := range []string{"ConfigMap", "Secret", "Job", "Recreate"} {
				if strings.Contains(got, planned) {
					t.Errorf("output plans objects of the refused spec (%s):\n%s", planned, got)
				}
			}
		})
	}
}

// TestWriteChanges_OwnerBeforeItsObjects: in every format an owner's objects come after its
// name and before the next owner's, so that no owner's objects read as another's.
func TestWriteChanges_OwnerBeforeItsObjects(t *testing.T) {
	changes := []plan.OwnerChanges{
		{Owner: "Valkey ns/demo-valkey", Exists: true, Changes: []plan.Change{{Action: apply.Skipped, Kind: "Deployment", Namespace: "ns", Name: "demo-valkey"}}},
		{Owner: "GiteaServer ns/demo", Exists: true, Changes: []plan.Change{{Action: apply.Created, Kind: "Service", Namespace: "ns", Name: "demo-http"}}},
	}
	for _, format := range []plan.Format{plan.Text, plan.YAML, plan.JSON} {
		t.Run(string(format), func(t *testing.T) {
			var out bytes.Buffer
			if err := plan.WriteChanges(&out, changes, format); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			order := []string{"Valkey ns/demo-valkey", "demo-valkey\n", "GiteaServer ns/demo", "demo-http"}
			if format == plan.JSON {
				order = []string{`"Valkey ns/demo-valkey"`, `"demo-valkey"`, `"GiteaServer ns/demo"`, `"demo-http"`}
			}
			at := -1
			for _, want := range order {
				i := strings.Index(got[at+1:], want)
				if i < 0 {
					t.Fatalf("output lacks %q after offset %d, want %q in that order:\n%s", want, at+1, order, got)
				}
				at += 1 + i
			}
		})
	}
}
