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

func TestFirstDifference(t *testing.T) {
	for _, tc := range []struct {
		name, want, got, contains string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"changed line", "a\nb\nc", "a\nx\nc", "line 2:"},
		{"got is longer", "a\n", "a\nb\n", "line 2:"},
		{"got is shorter", "a\nb\nc", "a\nb", "line 3:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := FirstDifference(tc.want, tc.got)
			if tc.contains == "" && d != "" || !strings.Contains(d, tc.contains) {
				t.Errorf("FirstDifference = %q, want it to contain %q", d, tc.contains)
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
