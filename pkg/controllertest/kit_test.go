package controllertest

import (
	"net/http"
	"strings"
	"testing"
)

func TestWriteLine(t *testing.T) {
	for _, tc := range []struct {
		method, path, want string
	}{
		{http.MethodPatch, "/api/v1/namespaces/ns/configmaps/demo", "PATCH configmaps/demo"},
		{http.MethodPost, "/api/v1/namespaces/ns/secrets", "POST secrets"},
		{http.MethodPatch, "/apis/gitea.kdag.dev/v1alpha1/namespaces/ns/valkeys/demo/status", "PATCH valkeys/demo/status"},
		{http.MethodDelete, "/apis/apps/v1/namespaces/ns/deployments/web", "DELETE deployments/web"},
		{http.MethodPut, "/api/v1/namespaces/ns", "PUT namespaces/ns"},
		{http.MethodGet, "/api/v1/namespaces/ns/configmaps/demo", ""},
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ns/events", ""},
		{http.MethodPost, "/api/v1/namespaces/ns/events", ""},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ""},
		{http.MethodPost, "/healthz", ""},
	} {
		got, ok := writeLine(tc.method, tc.path)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("writeLine(%s %s) = %q, %v; want %q", tc.method, tc.path, got, ok, tc.want)
		}
	}
}

// TestDiff: equal texts have no diff; otherwise the diff names the lines that differ, the want
// side's and the got side's (a missing line too).
func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name, want, got string
		lines           []string // quoted lines the diff must name
	}{
		{name: "equal", want: "a\nb\n", got: "a\nb\n"},
		{name: "changed line", want: "a\nb\nc", got: "a\nx\nc", lines: []string{`"b"`, `"x"`}},
		{name: "got is longer", want: "a\n", got: "a\nb\n", lines: []string{`"b"`}},
		{name: "got is shorter", want: "a\nb\nc", got: "a\nb", lines: []string{`"c"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Diff(tc.want, tc.got)
			if (d == "") != (tc.lines == nil) {
				t.Fatalf("Diff = %q, want a diff: %v", d, tc.lines != nil)
			}
			for _, l := range tc.lines {
				if !strings.Contains(d, l) || !strings.HasPrefix(d, "(-want +got)") {
					t.Errorf("Diff = %q, want a (-want +got) diff naming %s", d, l)
				}
			}
		})
	}
}

func TestUpdateCommand_RunsFromTheModuleRoot(t *testing.T) {
	t.Run("sub/test", func(t *testing.T) {
		got := updateCommand(t)
		want := "go test ./pkg/controllertest/ -run '^TestUpdateCommand_RunsFromTheModuleRoot$/^sub$/^test$' -update"
		if got != want {
			t.Errorf("updateCommand = %q\nwant             %q", got, want)
		}
	})
}
