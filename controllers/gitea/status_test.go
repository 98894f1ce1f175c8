package gitea

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

func TestReportStatus(t *testing.T) {
	server := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"version": "1.27.4", "url": "http://demo-http.default.svc:3000/"},
	}}
	serverNode := func(obj *unstructured.Unstructured) []controller.NodeReport {
		return []controller.NodeReport{{
			ID:     controller.NodeID{Group: giteav1alpha1.GroupVersion.Group, Kind: giteav1alpha1.GiteaServerKind, Namespace: "default", Name: "demo"},
			State:  kdagv1alpha1.NodeWaiting,
			Object: obj,
		}}
	}
	for _, tc := range []struct {
		name        string
		report      controller.Report
		wantVersion string
		wantURL     string
	}{
		{
			name:        "ready: the server's version and URL",
			report:      controller.Report{Ready: true, Nodes: serverNode(server)},
			wantVersion: "1.27.4", wantURL: "http://demo-http.default.svc:3000/",
		},
		{
			// During an upgrade the server's status already says the new version only once it is
			// Ready; until the whole graph is, the Gitea keeps the version it had.
			name:        "not ready: URL follows, version kept",
			report:      controller.Report{Nodes: serverNode(server)},
			wantVersion: "1.27.3", wantURL: "http://demo-http.default.svc:3000/",
		},
		{
			name:        "server not created yet: previous status kept",
			report:      controller.Report{Nodes: serverNode(nil)},
			wantVersion: "1.27.3", wantURL: "http://old/",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := defaulted()
			g.Status.Version, g.Status.URL = "1.27.3", "http://old/"
			got, err := ResourceManager{}.ReportStatus(t.Context(), g, tc.report)
			if err != nil {
				t.Fatal(err)
			}
			out := got.(*outputs)
			if out.Version != tc.wantVersion || out.URL != tc.wantURL {
				t.Errorf("ReportStatus = %+v, want version %q, url %q", out, tc.wantVersion, tc.wantURL)
			}
		})
	}
}
